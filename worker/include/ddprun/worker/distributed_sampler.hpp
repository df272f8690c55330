// PyTorch's DistributedSampler (shuffle=True, drop_last=False), index for
// index: a permutation from a generator seeded with seed + epoch, padded by
// wrapping around to a multiple of the world size, then every world-th index
// starting at the rank. The same seed gives the Python sampler's shards.
#pragma once

#include <torch/torch.h>

#include <cstdint>

namespace ddprun::worker {

class DistributedSampler {
 public:
  DistributedSampler(int64_t dataset_size, int rank, int world_size, uint64_t seed);

  // ceil(dataset_size / world_size): every rank gets this many each epoch.
  int64_t samplesPerRank() const { return samples_per_rank_; }
  // This rank's dataset indices for `epoch`, int64 [samplesPerRank()].
  torch::Tensor indices(int64_t epoch) const;
  // The number of batches of `batch_size` in one epoch; the last may be short.
  int64_t batchesPerEpoch(int64_t batch_size) const;

 private:
  int64_t dataset_size_;
  int rank_;
  int world_size_;
  uint64_t seed_;
  int64_t samples_per_rank_;
};

}  // namespace ddprun::worker

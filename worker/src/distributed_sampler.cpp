#include "ddprun/worker/distributed_sampler.hpp"

#include <ATen/CPUGeneratorImpl.h>

#include "ddprun/proto/errors.hpp"

namespace ddprun::worker {

DistributedSampler::DistributedSampler(int64_t dataset_size, int rank, int world_size,
                                       uint64_t seed)
    : dataset_size_(dataset_size), rank_(rank), world_size_(world_size), seed_(seed) {
  if (dataset_size <= 0 || world_size <= 0 || rank < 0 || rank >= world_size) {
    throw ConfigError("DistributedSampler: need a non-empty dataset and 0 <= rank < world");
  }
  samples_per_rank_ = (dataset_size + world_size - 1) / world_size;
}

torch::Tensor DistributedSampler::indices(int64_t epoch) const {
  // A fresh generator per epoch, like Python's g.manual_seed(seed + epoch).
  auto generator = at::make_generator<at::CPUGeneratorImpl>(seed_ + static_cast<uint64_t>(epoch));
  auto permutation = torch::randperm(dataset_size_, generator, torch::kLong);
  const int64_t total = samples_per_rank_ * world_size_;
  // Pad by repeating the permutation from its start, as many times as needed.
  const int64_t repeats = (total + dataset_size_ - 1) / dataset_size_;
  auto padded = permutation.repeat({repeats}).narrow(0, 0, total);
  return padded.slice(0, rank_, total, world_size_).contiguous();
}

int64_t DistributedSampler::batchesPerEpoch(int64_t batch_size) const {
  return (samples_per_rank_ + batch_size - 1) / batch_size;
}

}  // namespace ddprun::worker

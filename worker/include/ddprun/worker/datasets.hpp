// The tasks' data, whole in memory as tensors: a seeded synthetic regression
// set for mlp, Fashion-MNIST for fmnist and autoencoder. Every rank builds the
// same full dataset; the DistributedSampler picks each rank's shard.
#pragma once

#include <torch/torch.h>

#include <optional>

#include "ddprun/worker/train_options.hpp"

namespace ddprun::worker {

struct Dataset {
  torch::Tensor inputs;   // [N, features], float32
  torch::Tensor targets;  // [N, 1] float32 (mlp), [N] int64 labels, or the inputs
  int64_t size() const { return inputs.size(0); }
};

struct TaskData {
  Dataset train;
  std::optional<Dataset> test;  // fmnist: the 10,000-image test set
};

inline constexpr int64_t kMlpDefaultSamples = 2048;  // the tutorials' MyTrainDataset(2048)
inline constexpr int64_t kMlpFeatures = 20;

// Throws ConfigError naming the file when Fashion-MNIST cannot be read.
TaskData loadTaskData(const TrainOptions& options);

}  // namespace ddprun::worker

// The seeds' three models with their loss and optimiser. Built on the calling
// thread; the Task owns its model and optimiser.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "ddprun/worker/datasets.hpp"

namespace ddprun::worker {

struct Task {
  std::string name;
  torch::nn::Sequential model;
  std::unique_ptr<torch::optim::Optimizer> optimizer;
  std::function<torch::Tensor(const torch::Tensor& output, const torch::Tensor& target)> loss;
  bool reports_accuracy = false;  // a classifier: report test accuracy
};

// mlp: 20->64->1, MSE, SGD(momentum 0.9). fmnist: 784->128->10, cross entropy,
// Adam. autoencoder: 784->128->128->128->784, MSE, Adam. The weights are
// drawn from `seed` exactly as Python's nn.Linear draws them after
// torch.manual_seed(seed), so every rank, and a Python script seeded alike,
// starts from the same model.
Task makeTask(const std::string& name, std::optional<double> lr, uint64_t seed);

// The fraction of `data` the classifier labels correctly (no gradients).
double accuracy(torch::nn::Sequential& model, const Dataset& data, torch::Device device);

}  // namespace ddprun::worker

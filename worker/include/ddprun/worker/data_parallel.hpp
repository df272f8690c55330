// DistributedDataParallel for a C++ module, built on c10d's own Reducer (the
// engine behind Python's DDP): gradients are averaged by bucketed all-reduces
// that start during backward as each bucket's gradients become ready.
// Owns the Reducer; used from the training thread only (the Reducer's hooks
// run on autograd's thread, which the backward call waits for).
#pragma once

#include <torch/torch.h>

#include <memory>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/reducer.hpp>

namespace ddprun::worker {

class DataParallel {
 public:
  DataParallel(torch::nn::Module& module, c10::intrusive_ptr<c10d::ProcessGroup> group);

  // Copies rank 0's parameters and buffers to every rank (DDP's start-up sync),
  // in coalesced broadcasts.
  void broadcastFromRankZero();

  // Runs the module's forward with gradient reduction armed for the backward
  // that follows, as DDP.forward() does.
  torch::Tensor forward(const std::function<torch::Tensor()>& run_forward);

 private:
  torch::nn::Module& module_;
  c10::intrusive_ptr<c10d::ProcessGroup> group_;
  std::unique_ptr<c10d::Reducer> reducer_;
};

}  // namespace ddprun::worker

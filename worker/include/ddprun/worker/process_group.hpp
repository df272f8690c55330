// The worker's process group, built from the environment its launcher gave it:
// a c10d::TCPStore client at MASTER_ADDR:MASTER_PORT (under the agent-store
// convention of torchrun, or hosted by rank 0 when no agent hosts one) and a
// ProcessGroupGloo (CPU) or ProcessGroupNCCL (cuda:LOCAL_RANK, where
// LibTorch has CUDA) on top of it. Built once, on the main thread.
#pragma once

#include <torch/types.h>

#include <chrono>
#include <string>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "ddprun/proto/env_contract.hpp"

namespace ddprun::worker {

struct DistributedContext {
  proto::WorkerEnv env;
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<c10d::ProcessGroup> group;
  std::string backend;                // "gloo" or "nccl"
  torch::Device device{torch::kCPU};  // where the model, batches and collectives live
};

// The store key prefix torchrun's workers use for attempt `restart_count` when
// TORCHELASTIC_USE_AGENT_STORE=True, so attempts never see each other's keys.
std::string agentStorePrefix(int restart_count);

// Connects to (or, as rank 0 without an agent store, hosts) the store and
// builds the process group; blocks until every rank has joined or `timeout`
// passes. `backend` is "auto", "gloo" or "nccl" (training_device.hpp: a
// CPU-only LibTorch refuses "nccl" with a ConfigError).
DistributedContext connectProcessGroup(const proto::WorkerEnv& env, const std::string& backend,
                                       std::chrono::milliseconds timeout);

// A world of one over an in-process store, for `train` run by hand without a
// launcher (the tutorials' single-GPU script).
DistributedContext singleProcessGroup(const std::string& backend,
                                      std::chrono::milliseconds timeout);

}  // namespace ddprun::worker

// Where a rank trains and over which collective backend: the two seams
// between train and what its LibTorch may lack. Everything else in train is
// the same code on CPU and GPU (tensors go to DistributedContext::device).
// cuda_support's four calls are CUDA's: cuda_support_nccl.cpp implements
// them where LibTorch has CUDA and NCCL (DDPRUN_TORCH_HAS_CUDA),
// cuda_support_none.cpp where it has neither (Debian's libtorch-dev).
// gloo_support builds Gloo's group where LibTorch ships Gloo's headers
// (DDPRUN_TORCH_HAS_GLOO; a PyTorch wheel ships none, so a train built
// against one trains with NCCL only). Stateless; main thread.
#pragma once

#include <torch/types.h>

#include <chrono>
#include <iosfwd>
#include <optional>
#include <string>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "ddprun/proto/visible_gpus.hpp"

namespace ddprun::worker {

struct TrainingDevice {
  torch::Device device{torch::kCPU};
  std::string backend = "gloo";  // or "nccl"
};

// --backend auto: NCCL on cuda:LOCAL_RANK where this LibTorch has CUDA and
// sees a GPU, Gloo on the CPU otherwise; gloo: the CPU; nccl: cuda:LOCAL_RANK.
// A ConfigError says why the choice cannot be (no CUDA for nccl, no Gloo
// for the CPU).
TrainingDevice chooseTrainingDevice(const std::string& backend, int local_rank);

// What a CPU-only train says once, at start, when GPUs are visible all the
// same (and --backend auto left the choice to it); nullopt otherwise.
std::optional<std::string> unusedGpusNotice(const proto::VisibleGpus& visible,
                                            bool libtorch_has_cuda);

// Says unusedGpusNotice's line on `out` when this build has no CUDA,
// --backend is auto, this is rank 0 (once per job, even when
// --virtual-local-rank makes every LOCAL_RANK 0) and NVML sees a GPU.
void noteUnusedGpus(const std::string& backend, int rank, std::ostream& out);

namespace cuda_support {

bool compiledIn();          // this LibTorch has CUDA and NCCL
int deviceCount();          // GPUs LibTorch's CUDA sees; 0 where not compiled in
void useDevice(int index);  // cuda:index becomes this process's current device
c10::intrusive_ptr<c10d::ProcessGroup> ncclGroup(const c10::intrusive_ptr<c10d::Store>& store,
                                                 int rank, int world_size,
                                                 std::chrono::milliseconds timeout);

}  // namespace cuda_support

namespace gloo_support {

bool compiledIn();  // this train was built with Gloo's headers
c10::intrusive_ptr<c10d::ProcessGroup> glooGroup(const c10::intrusive_ptr<c10d::Store>& store,
                                                 int rank, int world_size,
                                                 std::chrono::milliseconds timeout);

}  // namespace gloo_support
}  // namespace ddprun::worker

// cuda_support for a LibTorch built with CUDA and NCCL. Compiled only there
// (DDPRUN_TORCH_HAS_CUDA); written against LibTorch 1.13's c10d, where a
// ProcessGroupNCCL is itself a ProcessGroup (as ProcessGroupGloo is in
// process_group.cpp).
#include <c10/cuda/CUDAFunctions.h>
#include <torch/cuda.h>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>

#include "ddprun/worker/training_device.hpp"

namespace ddprun::worker::cuda_support {

bool compiledIn() { return true; }

int deviceCount() { return static_cast<int>(torch::cuda::device_count()); }

void useDevice(int index) { c10::cuda::set_device(static_cast<c10::DeviceIndex>(index)); }

c10::intrusive_ptr<c10d::ProcessGroup> ncclGroup(const c10::intrusive_ptr<c10d::Store>& store,
                                                 int rank, int world_size,
                                                 std::chrono::milliseconds timeout) {
  auto options = c10d::ProcessGroupNCCL::Options::create();
  options->timeout = timeout;
  return c10::make_intrusive<c10d::ProcessGroupNCCL>(store, rank, world_size, options);
}

}  // namespace ddprun::worker::cuda_support

// cuda_support for a LibTorch built with CUDA and NCCL. Compiled only there
// (DDPRUN_TORCH_HAS_CUDA); c10d_compat makes the ProcessGroupNCCL a
// ProcessGroup on every version (1.13: it is one; 2.x: a group's CUDA
// backend).
#include <c10/cuda/CUDAFunctions.h>
#include <torch/cuda.h>

#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>

#include "ddprun/worker/c10d_compat.hpp"
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
  return c10d_compat::asProcessGroup(
      c10::make_intrusive<c10d::ProcessGroupNCCL>(store, rank, world_size, options), store, rank,
      world_size, c10::DeviceType::CUDA, "nccl");
}

}  // namespace ddprun::worker::cuda_support

// cuda_support for a LibTorch without CUDA (Debian's): nothing is visible
// to it, and nothing asks for NCCL (chooseTrainingDevice refuses first).
#include "ddprun/proto/errors.hpp"
#include "ddprun/worker/training_device.hpp"

namespace ddprun::worker::cuda_support {

bool compiledIn() { return false; }

int deviceCount() { return 0; }

void useDevice(int /*index*/) { throw Error("this train has no CUDA"); }

c10::intrusive_ptr<c10d::ProcessGroup> ncclGroup(const c10::intrusive_ptr<c10d::Store>& /*store*/,
                                                 int /*rank*/, int /*world_size*/,
                                                 std::chrono::milliseconds /*timeout*/) {
  throw Error("this train has no NCCL");
}

}  // namespace ddprun::worker::cuda_support

// gloo_support for a LibTorch without Gloo's headers (a PyTorch wheel's:
// its libraries have Gloo, but it ships no gloo/ headers to build against).
// Such a train trains on GPUs with NCCL only; chooseTrainingDevice refuses
// every other choice first, with one line.
#include "ddprun/proto/errors.hpp"
#include "ddprun/worker/training_device.hpp"

namespace ddprun::worker::gloo_support {

bool compiledIn() { return false; }

c10::intrusive_ptr<c10d::ProcessGroup> glooGroup(const c10::intrusive_ptr<c10d::Store>& /*store*/,
                                                 int /*rank*/, int /*world_size*/,
                                                 std::chrono::milliseconds /*timeout*/) {
  throw Error("this train has no Gloo");
}

}  // namespace ddprun::worker::gloo_support

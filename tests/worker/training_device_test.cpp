// Which device and backend a rank trains with, in this build (Debian's
// CPU-only LibTorch), and the notice for GPUs it cannot use.
#include "ddprun/worker/training_device.hpp"

#include <gtest/gtest.h>

#include "ddprun/proto/errors.hpp"

namespace ddprun::worker {
namespace {

TEST(TrainingDeviceTest, ACpuOnlyLibTorchTrainsOnTheCpuWithGloo) {
  if (cuda_support::compiledIn()) {
    GTEST_SKIP() << "this LibTorch has CUDA: the CPU-only choices do not apply";
  }
  for (const std::string backend : {"auto", "gloo"}) {
    const TrainingDevice device = chooseTrainingDevice(backend, 3);
    EXPECT_EQ(device.device, torch::Device(torch::kCPU)) << backend;
    EXPECT_EQ(device.backend, "gloo") << backend;
  }
  EXPECT_THROW(chooseTrainingDevice("nccl", 0), ConfigError);
}

TEST(TrainingDeviceTest, TheNoticeIsForVisibleGpusALibTorchWithoutCudaCannotUse) {
  proto::VisibleGpus one;
  one.count = 1;
  one.counted_by = "the CUDA driver";
  EXPECT_EQ(unusedGpusNotice(one, false),
            "train: 1 GPU is visible (counted by the CUDA driver), but this train was built "
            "against a LibTorch without CUDA: training on the CPU with Gloo");
  EXPECT_FALSE(unusedGpusNotice(one, true));
  EXPECT_FALSE(unusedGpusNotice(proto::VisibleGpus{}, false));
}

}  // namespace
}  // namespace ddprun::worker

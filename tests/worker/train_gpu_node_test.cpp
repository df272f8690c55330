// train on a GPU node when its LibTorch has no CUDA (Debian's): the mission's
// line `ddprun --nproc-per-node gpu --standalone train` on a pretend node
// with two GPUs (tests/fake_gpu's NVML and driver on the library path) runs
// one worker per GPU, and train says once, at start, that it trains on the
// CPU with Gloo instead of ignoring the GPUs in silence.
#include <gtest/gtest.h>

#include "ddprun/test_support/text.hpp"
#include "ddprun/worker/training_device.hpp"
#include "train_runner.hpp"

namespace ddprun::worker::testing {
namespace {

using test_support::countOf;

constexpr const char* kNotice =
    "train: 2 GPUs are visible (counted by NVML), but this train was built against a LibTorch "
    "without CUDA: training on the CPU with Gloo\n";

class TrainGpuNodeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda_support::compiledIn()) {
      GTEST_SKIP() << "this train's LibTorch has CUDA: these cases are for a CPU-only one";
    }
  }

  RunOutcome onTwoGpus(std::vector<std::string> argv) const {
    return runner_.run(std::move(argv), {{"LD_LIBRARY_PATH", std::string(DDPRUN_FAKE_NVML_DIR) +
                                                                 ":" + DDPRUN_FAKE_CUDA_DIR},
                                         {"FAKE_GPU_COUNT", "2"}});
  }

  std::vector<std::string> trainOnEveryGpu(std::vector<std::string> train_args = {}) const {
    std::vector<std::string> argv = {DDPRUN_BINARY, "--standalone",    "--nproc-per-node",
                                     "gpu",         TRAIN_BINARY,      "--total-epochs",
                                     "1",           "--snapshot-path", runner_.snapshot("gpu.pt")};
    argv.insert(argv.end(), train_args.begin(), train_args.end());
    return argv;
  }

  test_support::TempDir dir_{"ddprun-train-gpu-test"};
  TrainRunner runner_{dir_.path()};
};

TEST_F(TrainGpuNodeTest, OneWorkerPerGpuAndOneLineSayingTheyGoUnused) {
  const RunOutcome run = onTwoGpus(trainOnEveryGpu());
  ASSERT_TRUE(run.status.success()) << describe(run);
  EXPECT_NE(run.stdout_text.find("world 2 (gloo)"), std::string::npos) << run.stdout_text;
  EXPECT_EQ(countOf(run.stderr_text, kNotice), 1) << run.stderr_text;
  EXPECT_EQ(countOf(run.stderr_text, "GPU"), countOf(kNotice, "GPU") + 1)
      << "more said of GPUs than the agent's count and the notice: " << run.stderr_text;
}

TEST_F(TrainGpuNodeTest, ByHandTooAndNeverWhenTheUserChoseGloo) {
  RunOutcome run = onTwoGpus(
      {TRAIN_BINARY, "--total-epochs", "1", "--snapshot-path", runner_.snapshot("alone.pt")});
  ASSERT_TRUE(run.status.success()) << describe(run);
  EXPECT_EQ(run.stderr_text, kNotice);

  run = onTwoGpus(trainOnEveryGpu({"--backend", "gloo"}));
  ASSERT_TRUE(run.status.success()) << describe(run);
  EXPECT_EQ(countOf(run.stderr_text, "train:"), 0) << run.stderr_text;
}

TEST_F(TrainGpuNodeTest, NoGpuVisibleNoLine) {
  const RunOutcome run = runner_.run(
      {TRAIN_BINARY, "--total-epochs", "1", "--snapshot-path", runner_.snapshot("cpu.pt")},
      {{"LD_LIBRARY_PATH", std::string(DDPRUN_FAKE_NVML_DIR)}, {"FAKE_GPU_COUNT", "0"}});
  ASSERT_TRUE(run.status.success()) << describe(run);
  EXPECT_EQ(run.stderr_text, "");
}

TEST_F(TrainGpuNodeTest, NcclOnACpuOnlyLibTorchIsOneLineAndExit2) {
  const RunOutcome run = onTwoGpus({TRAIN_BINARY, "--backend", "nccl", "--total-epochs", "1"});
  EXPECT_EQ(run.status.shellCode(), 2) << describe(run);
  EXPECT_EQ(run.stderr_text,
            "train: error: --backend nccl: this train was built against a CPU-only LibTorch "
            "(Gloo only)\n");
}

}  // namespace
}  // namespace ddprun::worker::testing

// train end to end: real processes under the real ddprun, real Gloo, real
// snapshots. Data parallelism is equivalent to one big batch; a crash resumes
// from the snapshot and lands exactly where an uninterrupted run does; a kill
// during a save loses nothing; Fashion-MNIST really trains.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>

#include "ddprun/worker/snapshot.hpp"
#include "train_runner.hpp"

namespace ddprun::worker::testing {
namespace {

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

class TrainRunTest : public ::testing::Test {
 protected:
  test_support::TempDir dir_{"ddprun-train-test"};
  TrainRunner runner_{dir_.path()};
};

// The same global batch (128) and seed, as 1 x 128 and as 4 x 32: the
// averaged gradients are the same sums in another order, so the models agree
// to float32 rounding. Tolerance: 1e-5 absolute after 3 epochs (48 steps).
TEST_F(TrainRunTest, OneWorkerAndFourWorkersEndWithTheSameModel) {
  const auto one = runner_.ddprun(1, {"--total-epochs", "3", "--batch-size", "128",
                                      "--snapshot-path", runner_.snapshot("one.pt")});
  ASSERT_TRUE(one.status.success()) << describe(one);
  const auto four = runner_.ddprun(4, {"--total-epochs", "3", "--batch-size", "32",
                                       "--snapshot-path", runner_.snapshot("four.pt")});
  ASSERT_TRUE(four.status.success()) << describe(four);
  EXPECT_TRUE(contains(four.stdout_text, "world 4 (gloo), batch 32 x 4")) << four.stdout_text;

  Task single = loadSnapshotInto("mlp", runner_.snapshot("one.pt"));
  Task parallel = loadSnapshotInto("mlp", runner_.snapshot("four.pt"));
  Task untrained = makeTask("mlp", std::nullopt, 0);
  EXPECT_GT(maxParameterDifference(single, untrained), 1e-3) << "the model did not train";
  EXPECT_LT(maxParameterDifference(single, parallel), 1e-5);
}

// A rank SIGKILLed at the start of epoch 3 of 6; ddprun restarts the group,
// which resumes from the snapshot of epoch 2 and must end bit-for-bit where a
// run that never crashed ends (same world size, so the same reduction order).
TEST_F(TrainRunTest, CrashAtEpochThreeResumesAndMatchesAnUninterruptedRun) {
  const std::vector<std::string> common = {"--total-epochs", "6", "--save-every", "2"};
  auto crashed_args = common;
  crashed_args.insert(crashed_args.end(),
                      {"--snapshot-path", runner_.snapshot("crashed.pt"), "--fail-at-epoch", "3",
                       "--fail-rank", "1", "--fail-mode", "kill"});
  const auto crashed = runner_.ddprun(2, crashed_args, {"--max-restarts", "1"});
  ASSERT_TRUE(crashed.status.success()) << describe(crashed);
  EXPECT_TRUE(contains(crashed.stderr_text, "restarting the worker group (attempt 1)"));
  EXPECT_TRUE(contains(crashed.stdout_text,
                       "resuming from " + runner_.snapshot("crashed.pt") + " after epoch 2"))
      << crashed.stdout_text;

  auto clean_args = common;
  clean_args.insert(clean_args.end(), {"--snapshot-path", runner_.snapshot("clean.pt")});
  const auto clean = runner_.ddprun(2, clean_args);
  ASSERT_TRUE(clean.status.success()) << describe(clean);

  EXPECT_EQ(inspectSnapshot(runner_.snapshot("crashed.pt")).epochs_run, 6);
  Task resumed = loadSnapshotInto("mlp", runner_.snapshot("crashed.pt"));
  Task uninterrupted = loadSnapshotInto("mlp", runner_.snapshot("clean.pt"));
  EXPECT_EQ(maxParameterDifference(resumed, uninterrupted), 0.0);
}

// Rank 0 is SIGKILLed halfway through writing the snapshot after epoch 2:
// the snapshot of epoch 1 must survive whole, and the restart resumes from it.
TEST_F(TrainRunTest, KillDuringASaveLeavesTheLastSnapshotWhole) {
  const std::string path = runner_.snapshot("snap.pt");
  const auto run = runner_.ddprun(
      2,
      {"--total-epochs", "4", "--save-every", "1", "--snapshot-path", path, "--fail-at-epoch", "1",
       "--fail-rank", "0", "--fail-mode", "kill-during-save"},
      {"--max-restarts", "1"});
  ASSERT_TRUE(run.status.success()) << describe(run);
  EXPECT_TRUE(contains(run.stderr_text, "injected failure (kill-during-save)")) << run.stderr_text;
  EXPECT_TRUE(contains(run.stdout_text, "resuming from " + path + " after epoch 1"))
      << run.stdout_text;
  EXPECT_EQ(inspectSnapshot(path).epochs_run, 4);
}

TEST_F(TrainRunTest, AnInjectedFailureIsTheReportedRootCause) {
  const auto run =
      runner_.ddprun(4, {"--total-epochs", "3", "--snapshot-path", runner_.snapshot("s.pt"),
                         "--fail-at-epoch", "1", "--fail-rank", "2"});
  EXPECT_EQ(run.status.shellCode(), 1) << describe(run);
  const auto root = run.stderr_text.find("Root Cause");
  ASSERT_NE(root, std::string::npos) << run.stderr_text;
  const std::string cause = run.stderr_text.substr(root);
  EXPECT_TRUE(contains(cause, "rank      : 2")) << cause;
  EXPECT_TRUE(contains(cause, "injected failure at epoch 1 on rank 2")) << cause;
}

TEST_F(TrainRunTest, ACorruptSnapshotStopsEveryRankWithOneLineNamingIt) {
  const std::string path = runner_.snapshot("corrupt.pt");
  std::ofstream(path) << "these are not the bytes you are looking for\n";
  const auto run = runner_.ddprun(2, {"--snapshot-path", path});
  EXPECT_EQ(run.status.shellCode(), 1) << describe(run);
  EXPECT_TRUE(
      contains(run.stderr_text, "train: error: snapshot " + path + ": not a train snapshot"))
      << run.stderr_text;
  const auto fresh =
      runner_.ddprun(2, {"--total-epochs", "1", "--snapshot-path", path, "--ignore-snapshot"});
  EXPECT_TRUE(fresh.status.success()) << describe(fresh);
}

TEST_F(TrainRunTest, FashionMnistWithTwoWorkersReachesEightyPercent) {
  if (!std::filesystem::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz")) {
    GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  }
  const auto run = runner_.ddprun(2, {"--task", "fmnist", "--total-epochs", "2", "--batch-size",
                                      "64", "--snapshot-path", runner_.snapshot("f.pt")});
  ASSERT_TRUE(run.status.success()) << describe(run);
  std::smatch match;
  const std::regex last_accuracy(R"(epoch 1/2 \| loss [0-9.]+ \| accuracy ([0-9.]+)%)");
  ASSERT_TRUE(std::regex_search(run.stdout_text, match, last_accuracy)) << run.stdout_text;
  EXPECT_GE(std::stod(match[1].str()), 80.0) << run.stdout_text;
}

TEST_F(TrainRunTest, RunByHandItTrainsAsAWorldOfOne) {
  const auto run =
      runner_.trainAlone({"--total-epochs", "2", "--snapshot-path", runner_.snapshot("alone.pt")});
  ASSERT_TRUE(run.status.success()) << describe(run);
  EXPECT_TRUE(contains(run.stdout_text, "world 1 (gloo)")) << run.stdout_text;
  EXPECT_EQ(inspectSnapshot(runner_.snapshot("alone.pt")).epochs_run, 2);
}

TEST_F(TrainRunTest, AnIncompleteOrInconsistentEnvironmentIsNamed) {
  const auto partial = runner_.trainAlone({}, {{"RANK", "0"}});
  EXPECT_EQ(partial.status.shellCode(), 2) << describe(partial);
  EXPECT_TRUE(contains(partial.stderr_text, "train: error: worker environment:"))
      << partial.stderr_text;
  const auto bad_rank = runner_.trainAlone({}, {{"RANK", "4"},
                                                {"LOCAL_RANK", "0"},
                                                {"WORLD_SIZE", "4"},
                                                {"MASTER_ADDR", "127.0.0.1"},
                                                {"MASTER_PORT", "29500"}});
  EXPECT_EQ(bad_rank.status.shellCode(), 2) << describe(bad_rank);
  EXPECT_TRUE(contains(bad_rank.stderr_text, "RANK")) << bad_rank.stderr_text;
  EXPECT_EQ(bad_rank.stderr_text.find('\n'), bad_rank.stderr_text.size() - 1)
      << "more than one line: " << bad_rank.stderr_text;
}

}  // namespace
}  // namespace ddprun::worker::testing

// train's events on its agent's timeline: a rank SIGKILLed at the start of
// epoch 3, ddprun restarting the group, train resuming from the snapshot of
// epoch 2 and saving again; the timeline (real ddprun, real train, real
// Gloo) shows the kill, the restart, the resume and the snapshots after it.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "ddprun/test_support/files.hpp"
#include "ddprun/test_support/trace_check.hpp"
#include "train_runner.hpp"

namespace ddprun::worker::testing {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

std::vector<json> named(const std::vector<json>& events, const std::string& name) {
  return test_support::eventsNamed(events, name);
}

TEST(TrainTimelineTest, TheTimelineShowsTheKillTheResumeAndTheSnapshotsAfterIt) {
  test_support::TempDir dir("ddprun-train-timeline");
  const TrainRunner runner(dir.path());
  const fs::path logs = dir / "logs";
  const auto run = runner.ddprun(
      2,
      {"--total-epochs", "6", "--save-every", "2", "--snapshot-path", runner.snapshot("s.pt"),
       "--fail-at-epoch", "3", "--fail-rank", "1", "--fail-mode", "kill"},
      {"--max-restarts", "1", "--log-dir", logs.string()});
  ASSERT_TRUE(run.status.success()) << describe(run);
  fs::path file;
  for (const auto& entry : fs::directory_iterator(logs)) {
    file = entry.path() / "timeline.json";
  }
  const std::string text = test_support::readFile(file);
  const test_support::TraceCheck check = test_support::checkTrace(text);
  ASSERT_TRUE(check.problems.empty()) << check.problems.front() << "\n" << text;
  EXPECT_TRUE(check.closed);
  EXPECT_EQ(check.open_slices, 0);
  const std::vector<json> events = json::parse(text).get<std::vector<json>>();

  // The killed rank's failure. Its peer may fail too (its Gloo connection
  // reset) before the agent's SIGTERM reaches it; on a loaded machine the
  // agent can even see the peer's exit first (seen under -j2), so the kill
  // is looked for among the failures, not at their head.
  const auto failed = named(events, "worker failed");
  const auto killed = std::find_if(failed.begin(), failed.end(), [](const json& event) {
    return event["args"]["rank"] == 1 && event["args"]["signal"] == "SIGKILL";
  });
  ASSERT_NE(killed, failed.end()) << text;
  EXPECT_EQ((*killed)["args"]["round"], 0);
  for (const json& event : failed) {
    EXPECT_EQ(event["args"]["round"], 0) << "a failure after the restart: " << text;
  }
  ASSERT_EQ(named(events, "restart").size(), 1u) << text;

  const auto resumed = named(events, "resumed from snapshot");
  ASSERT_EQ(resumed.size(), 2u) << "each rank resumes: " << text;
  for (const json& event : resumed) {
    EXPECT_EQ(event["args"]["round"], 1);
    EXPECT_EQ(event["args"]["epochs_run"], 2);
  }
  int after_resume = 0;
  for (const json& snapshot : named(events, "snapshot")) {
    EXPECT_EQ(snapshot["ph"], "X");
    EXPECT_GE(snapshot["dur"].get<double>(), 0);
    EXPECT_EQ(snapshot["args"]["rank"], 0) << "rank 0 saves";
    if (snapshot["args"]["round"] == 1 && snapshot["ts"] > resumed[0]["ts"]) {
      ++after_resume;
    }
  }
  EXPECT_EQ(after_resume, 2) << "the snapshots after epochs 4 and 6: " << text;
}

}  // namespace
}  // namespace ddprun::worker::testing

// The timeline an agent writes of a crash and its resume, with real worker
// processes (fake_worker, which also reports an event of its own through
// DDPRUN_TIMELINE_EVENTS) and a scripted rendezvous: rank 1 exits 3 in
// attempt 0, the group restarts once, and attempt 1 ends well. Rank 1 fails
// only once rank 0 has reported: otherwise, on a loaded machine, rank 0 could
// be stopped before it ever ran, and have nothing to report.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "ddprun/launcher/agent/agent.hpp"
#include "ddprun/launcher/observe/timeline_format.hpp"
#include "ddprun/launcher/observe/timeline_writer.hpp"
#include "ddprun/test_support/files.hpp"
#include "ddprun/test_support/temp_dir.hpp"
#include "ddprun/test_support/trace_check.hpp"
#include "fake_rendezvous.hpp"
#include "fake_worker_config.hpp"

namespace ddprun::launcher {
namespace {

using nlohmann::json;
using testing::FakeRendezvous;
using testing::singleNode;

std::vector<json> where(const std::vector<json>& events,
                        const std::function<bool(const json&)>& predicate) {
  std::vector<json> found;
  std::copy_if(events.begin(), events.end(), std::back_inserter(found), predicate);
  return found;
}

TEST(AgentTimelineTest, ACrashAndItsResumeAreOnTheTimeline) {
  test_support::TempDir dir("ddprun-agent-timeline");
  const auto events_dir = dir / "worker_events";
  FakeRendezvous rendezvous(singleNode(2));
  WorkerEnvironment::Job job;
  job.run_id = "timeline";
  const std::string ready_dir = dir.path().string();
  AgentConfig config = testing::fakeWorkerConfig(
      rendezvous, 2,
      {"--timeline-event", "reported", "--ready-to", ready_dir, "--after", ready_dir + "/0.ready",
       "--only-rank", "1", "--only-attempt", "0", "--exit", "3"},
      1, job, {{"PATH", "/usr/bin:/bin"}});
  TimelineWriter timeline(dir / "timeline.json", {"node0", "timeline", events_dir});
  config.environment.reportTimelineEventsTo(events_dir);
  config.events = &timeline;
  const RunResult result = Agent(std::move(config)).run();
  ASSERT_EQ(result.exit_code, 0) << result.error;
  timeline.close(result.exit_code);

  const std::string text = test_support::readFile(dir / "timeline.json");
  const test_support::TraceCheck check = test_support::checkTrace(text);
  ASSERT_TRUE(check.problems.empty()) << check.problems.front() << "\n" << text;
  EXPECT_TRUE(check.closed);
  EXPECT_EQ(check.open_slices, 0) << text;
  const std::vector<json> events = json::parse(text).get<std::vector<json>>();

  const auto rounds = where(
      events, [](const json& e) { return e["tid"] == timeline::kRoundsTrack && e["ph"] == "B"; });
  ASSERT_EQ(rounds.size(), 2u) << text;
  EXPECT_EQ(rounds[0]["args"]["round"], 0);
  EXPECT_EQ(rounds[1]["args"]["round"], 1);
  EXPECT_EQ(rounds[0]["args"]["world_size"], 2);

  const auto exits =
      where(events, [](const json& e) { return e["ph"] == "E" && e["name"] == "rank 1"; });
  ASSERT_EQ(exits.size(), 2u) << text;
  EXPECT_EQ(exits[0]["args"]["exit_code"], 3);
  EXPECT_EQ(exits[0]["args"]["failed"], true);
  const auto failed = where(events, [](const json& e) { return e["name"] == "worker failed"; });
  ASSERT_EQ(failed.size(), 1u) << text;
  EXPECT_EQ(failed[0]["args"]["exit_code"], 3);
  EXPECT_EQ(failed[0]["args"]["round"], 0);

  const auto restarts = where(events, [](const json& e) { return e["name"] == "restart"; });
  ASSERT_EQ(restarts.size(), 1u) << text;
  EXPECT_EQ(restarts[0]["args"]["restarts_used"], 1);
  EXPECT_GT(restarts[0]["ts"], failed[0]["ts"]);
  EXPECT_LT(restarts[0]["ts"], rounds[1]["ts"]);

  // Attempt 1: both workers start after the restart and end with 0.
  const auto second = where(events, [&](const json& e) {
    return e["ph"] == "E" && e["ts"] > rounds[1]["ts"] &&
           std::string(e["name"]).rfind("rank ", 0) == 0;
  });
  ASSERT_EQ(second.size(), 2u) << text;
  for (const json& exit : second) {
    EXPECT_EQ(exit["args"]["exit_code"], 0);
    EXPECT_EQ(exit["args"]["failed"], false);
  }

  // Each worker of each attempt reported one event, on its own track.
  const auto reported = where(events, [](const json& e) { return e["name"] == "reported"; });
  ASSERT_EQ(reported.size(), 4u) << text;
  for (const json& event : reported) {
    EXPECT_EQ(event["args"]["attempt"], event["args"]["round"]);
    EXPECT_EQ(event["tid"], timeline::reportedTrack(event["args"]["rank"].get<int>()));
  }

  const auto finished =
      where(events, [](const json& e) { return e["name"] == "workers finished"; });
  ASSERT_EQ(finished.size(), 1u);
  EXPECT_EQ(finished[0]["args"]["exit_code"], 0);
  EXPECT_EQ(events.back()["name"], "ddprun exit");
  EXPECT_EQ(events.back()["args"]["exit_code"], 0);
}

}  // namespace
}  // namespace ddprun::launcher

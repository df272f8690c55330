// What an agent tells its observer (AgentConfig::events), with real worker
// processes (fake_worker) and a scripted rendezvous: the order of a run with
// one crash and one restart, that a fan-out tells each observer the same, and
// the heartbeat /healthz judges the loop by (AgentConfig::heartbeat).
#include "ddprun/launcher/core/agent_events.hpp"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "ddprun/launcher/agent/agent.hpp"
#include "ddprun/launcher/core/loop_heartbeat.hpp"
#include "ddprun/test_support/eventually.hpp"
#include "fake_rendezvous.hpp"
#include "fake_worker_config.hpp"

namespace ddprun::launcher {
namespace {

using testing::FakeRendezvous;
using testing::singleNode;

// Writes each call down as one short line.
class Recorder : public AgentEvents {
 public:
  void rendezvousStarted(Clock::time_point) override { lines.push_back("rendezvous"); }
  void roundJoined(const WorkerGroup& group, Clock::duration waited, Clock::time_point) override {
    lines.push_back("round " + std::to_string(group.attempt));
    waits_non_negative = waits_non_negative && waited.count() >= 0;
  }
  void workerStarted(int local_rank, int, pid_t pid, Clock::time_point) override {
    lines.push_back("start " + std::to_string(local_rank));
    pids_positive = pids_positive && pid > 0;
  }
  void workerExited(int local_rank, int, pid_t, const ExitStatus& status, bool failed,
                    Clock::time_point) override {
    lines.push_back("exit " + std::to_string(local_rank) + " " + status.describe() +
                    (failed ? " failed" : ""));
  }
  void groupStopping(StopReason reason, Clock::time_point) override {
    lines.push_back("stop " + std::string(stopReasonName(reason)));
  }
  void restarting(int used, int max, Clock::time_point) override {
    lines.push_back("restart " + std::to_string(used) + "/" + std::to_string(max));
  }
  void finished(int code, Clock::time_point) override {
    lines.push_back("finished " + std::to_string(code));
  }

  std::vector<std::string> lines;
  bool waits_non_negative = true;
  bool pids_positive = true;
};

TEST(AgentEventsTest, ACrashAndItsRestartAreToldInOrder) {
  FakeRendezvous rendezvous(singleNode(1));
  WorkerEnvironment::Job job;
  job.run_id = "events";
  AgentConfig config = testing::fakeWorkerConfig(
      rendezvous, 1, {"--only-attempt", "0", "--exit", "3"}, 1, job, {{"PATH", "/usr/bin:/bin"}});
  Recorder first;
  Recorder second;
  AgentEventsFanOut both;
  both.add(&first);
  both.add(&second);
  config.events = &both;
  const RunResult result = Agent(std::move(config)).run();
  ASSERT_EQ(result.exit_code, 0);
  const std::vector<std::string> expected = {"rendezvous",   "round 0",
                                             "start 0",      "exit 0 exited with code 3 failed",
                                             "stop failure", "restart 1/1",
                                             "rendezvous",   "round 1",
                                             "start 0",      "exit 0 exited with code 0",
                                             "finished 0"};
  EXPECT_EQ(first.lines, expected);
  EXPECT_EQ(second.lines, expected);
  EXPECT_TRUE(first.waits_non_negative);
  EXPECT_TRUE(first.pids_positive);
}

// One of two nodes; the other is lost while this one's workers run.
WorkerGroup firstOfTwoNodes() {
  WorkerGroup group = singleNode(1);
  group.group_world_size = 2;
  group.world_size = 2;
  return group;
}

std::vector<std::string> restartsTold(const Recorder& recorder) {
  std::vector<std::string> told;
  for (const std::string& line : recorder.lines) {
    if (line.starts_with("restart ")) {
      told.push_back(line);
    }
  }
  return told;
}

// One worker whose first attempt exits 3, one restart allowed, told to
// `recorder`.
RunResult runWithOneCrash(FakeRendezvous& rendezvous, Recorder& recorder) {
  WorkerEnvironment::Job job;
  job.run_id = "events";
  AgentConfig config = testing::fakeWorkerConfig(
      rendezvous, 1, {"--only-attempt", "0", "--exit", "3"}, 1, job, {{"PATH", "/usr/bin:/bin"}});
  config.events = &recorder;
  return Agent(std::move(config)).run();
}

// The worker failed (a lost node reset its connections) before the agent
// heard the node was lost; with a restart left, the agent asks for one, and
// the rendezvous says a member of that round was lost: the next round runs
// and no restart is counted. Before, every such failure used a restart.
TEST(AgentEventsTest, AFailureInARoundThatLostANodeCountsNoRestart) {
  FakeRendezvous rendezvous(firstOfTwoNodes());
  rendezvous.setFailureStands(false);
  Recorder recorder;
  const RunResult result = runWithOneCrash(rendezvous, recorder);
  EXPECT_EQ(result.exit_code, 0);
  EXPECT_EQ(result.attempts, 2);
  EXPECT_TRUE(restartsTold(recorder).empty());
  EXPECT_EQ(rendezvous.failureChecks(), std::vector<int>{0});
  EXPECT_EQ(rendezvous.restartChecks(), std::vector<bool>{true});
}

// The same failure in a round that lost nobody is counted; a group of one
// node cannot have lost another, and is not asked.
TEST(AgentEventsTest, AFailureInARoundThatLostNobodyCountsItsRestart) {
  for (const bool alone : {false, true}) {
    FakeRendezvous rendezvous(alone ? singleNode(1) : firstOfTwoNodes());
    Recorder recorder;
    const RunResult result = runWithOneCrash(rendezvous, recorder);
    EXPECT_EQ(result.exit_code, 0) << "alone: " << alone;
    EXPECT_EQ(restartsTold(recorder), std::vector<std::string>{"restart 1/1"}) << alone;
    EXPECT_EQ(rendezvous.failureChecks().size(), alone ? 0U : 1U);
  }
}

// While run() runs, the loop beats: the heartbeat judges the agent stuck
// only past the bound (judged as if that much later), never now; once run()
// returns there is no loop to judge.
TEST(AgentEventsTest, TheLoopBeatsWhileTheAgentRuns) {
  using namespace std::chrono_literals;
  FakeRendezvous rendezvous(singleNode(1));
  WorkerEnvironment::Job job;
  job.run_id = "heartbeat";
  AgentConfig config = testing::fakeWorkerConfig(rendezvous, 1, {"--tick", "100", "25"}, 0, job,
                                                 {{"PATH", "/usr/bin:/bin"}});
  LoopHeartbeat heartbeat;
  config.heartbeat = &heartbeat;
  const auto past_the_bound = [&] {
    return heartbeat.stalled(LoopHeartbeat::Clock::now() + LoopHeartbeat::kStallBound + 5s);
  };
  EXPECT_EQ(past_the_bound(), "");  // not running yet: nothing to judge
  std::optional<RunResult> result;
  std::thread agent([&] { result = Agent(std::move(config)).run(); });
  const bool beaten = test_support::eventually([&] { return !past_the_bound().empty(); }, 10s);
  EXPECT_EQ(heartbeat.stalled(), "");
  agent.join();
  EXPECT_TRUE(beaten) << "the loop never beat";
  ASSERT_TRUE(result);
  EXPECT_EQ(result->exit_code, 0);
  EXPECT_EQ(past_the_bound(), "");
}

TEST(LoopHeartbeatTest, StalledPastTheBoundSaysForHowLong) {
  using namespace std::chrono_literals;
  LoopHeartbeat heartbeat;
  const auto now = LoopHeartbeat::Clock::now();
  heartbeat.beat(now);
  EXPECT_EQ(heartbeat.stalled(now + LoopHeartbeat::kStallBound), "");
  EXPECT_EQ(heartbeat.stalled(now + 12s), "the agent's loop has not turned for 12 s");
  heartbeat.stop();
  EXPECT_EQ(heartbeat.stalled(now + 12s), "");
}

}  // namespace
}  // namespace ddprun::launcher

// What an agent tells its observer (AgentConfig::events), with real worker
// processes (fake_worker) and a scripted rendezvous: the order of a run with
// one crash and one restart, and that a fan-out tells each observer the same.
#include "ddprun/launcher/core/agent_events.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ddprun/launcher/agent/agent.hpp"
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

}  // namespace
}  // namespace ddprun::launcher

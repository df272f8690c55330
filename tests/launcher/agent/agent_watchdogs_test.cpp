// The agent's watchdogs with real worker processes (fake_worker) and a
// scripted rendezvous (docs/torchrun-contract.md §7.6): a silent, idle worker
// is hung after --worker-hang-timeout, every worker's stack is captured, it is killed
// and fails like a crash (restarted while restarts last); a worker that
// prints, or that spins, is not hung. torch's file timer: a worker's expired
// deadline kills it, with the scope in the failure; a released one does not;
// a request naming a process that is not the job's signals nothing.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <filesystem>

#include "ddprun/launcher/agent/agent.hpp"
#include "ddprun/launcher/process/subprocess.hpp"
#include "ddprun/test_support/files.hpp"
#include "ddprun/test_support/temp_dir.hpp"
#include "fake_rendezvous.hpp"
#include "fake_worker_config.hpp"

namespace ddprun::launcher {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using testing::FakeRendezvous;
using testing::singleNode;

// `timer_file` non-empty: the file timer is served there (and exported).
AgentConfig watchedConfig(Rendezvous& rendezvous, int nproc, std::vector<std::string> worker_args,
                          int max_restarts = 0, std::string timer_file = "") {
  WorkerEnvironment::Job job;
  job.timer_file = timer_file;
  AgentConfig config = testing::fakeWorkerConfig(rendezvous, nproc, std::move(worker_args),
                                                 max_restarts, job, {{"PATH", "/usr/bin:/bin"}});
  config.timer_file = timer_file;
  return config;
}

// Time since `start` as a double in seconds, for messages.
double secondsSince(Clock::time_point start, Clock::time_point end = Clock::now()) {
  return std::chrono::duration<double>(end - start).count();
}

// Without eu-stack or gdb on the tools' PATH the stack says so, and the failure's time
// is the detection's: after the timeout, within a tick (0.25 s) or so.
TEST(AgentWatchdogTest, AHungWorkerIsKilledAndFailsLikeACrash) {
  FakeRendezvous rendezvous(singleNode(2));
  AgentConfig config = watchedConfig(rendezvous, 2, {"--only-rank", "1", "--hang"});
  config.worker_hang_timeout = 1s;
  config.tools_path = "/nonexistent";
  const auto started = Clock::now();
  const RunResult result = Agent(config).run();
  EXPECT_EQ(result.exit_code, 128 + SIGKILL);
  ASSERT_EQ(result.failures.size(), 1u);
  const WorkerFailure& failure = result.failures.front();
  EXPECT_EQ(failure.rank, 1);
  EXPECT_EQ(failure.status, (ExitStatus{ExitStatus::Kind::Signaled, SIGKILL}));
  EXPECT_EQ(failure.verdict.reason, "hung: no output and no CPU time for 1 s (stack below)");
  EXPECT_EQ(failure.verdict.stack, "no stack: neither eu-stack nor gdb is on PATH\n");
  const double detected = secondsSince(started, failure.monotonic);
  EXPECT_GE(detected, 1.0);
  EXPECT_LT(detected, 3.0);
  const std::string report = formatFailureReport(result, "host0", "train");
  EXPECT_NE(report.find("rank      : 1 (local_rank: 1)"), std::string::npos) << report;
  EXPECT_NE(report.find("reason    : hung: no output and no CPU time for 1 s (stack below); "
                        "killed by SIGKILL (signal 9)"),
            std::string::npos)
      << report;
  EXPECT_NE(report.find("  stack     :\n    no stack: neither eu-stack nor gdb is on PATH\n"),
            std::string::npos)
      << report;
}

TEST(AgentWatchdogTest, AHungWorkerIsRestartedLikeACrash) {
  FakeRendezvous rendezvous(singleNode(2));
  AgentConfig config =
      watchedConfig(rendezvous, 2, {"--only-rank", "0", "--only-attempt", "0", "--hang"}, 1);
  config.worker_hang_timeout = 1s;
  const RunResult result = Agent(config).run();
  EXPECT_EQ(result.exit_code, 0);
  EXPECT_EQ(result.attempts, 2);
  EXPECT_EQ(rendezvous.restartRequests(), 1) << "a counted restart";
}

// A line every 0.3 s for 3 s: never 1 s without output.
TEST(AgentWatchdogTest, AWorkerThatPrintsIsNotHung) {
  FakeRendezvous rendezvous(singleNode(1));
  AgentConfig config = watchedConfig(rendezvous, 1, {"--tick", "300", "10"});
  config.worker_hang_timeout = 1s;
  const RunResult result = Agent(config).run();
  EXPECT_EQ(result.exit_code, 0);
  EXPECT_TRUE(result.failures.empty());
}

// Silent for 3 s, but busy: a spinning worker is not hung by this measure.
TEST(AgentWatchdogTest, AWorkerThatSpinsSilentlyIsNotHung) {
  FakeRendezvous rendezvous(singleNode(1));
  AgentConfig config = watchedConfig(rendezvous, 1, {"--spin", "3000"});
  config.worker_hang_timeout = 1s;
  const RunResult result = Agent(config).run();
  EXPECT_EQ(result.exit_code, 0);
  EXPECT_TRUE(result.failures.empty());
}

// The worker waits, silent and idle, for a child that works 3 s: the CPU
// time of the worker's descendants counts (a DataLoader's workers).
TEST(AgentWatchdogTest, AWorkerWhoseChildWorksIsNotHung) {
  FakeRendezvous rendezvous(singleNode(1));
  AgentConfig config = watchedConfig(rendezvous, 1, {"--child-spin", "3000"});
  config.worker_hang_timeout = 1s;
  const RunResult result = Agent(config).run();
  EXPECT_EQ(result.exit_code, 0);
  EXPECT_TRUE(result.failures.empty());
}

// torch's FileTimerClient.acquire() with a deadline already past, on rank 1;
// rank 0 just runs, and is stopped with the group.
TEST(AgentWatchdogTest, AnExpiredFileTimerKillsTheWorkerAndNamesTheScope) {
  test_support::TempDir dir;
  const std::string fifo = (dir.path() / "timer").string();
  FakeRendezvous rendezvous(singleNode(2));
  AgentConfig config = watchedConfig(rendezvous, 2, {}, 0, fifo);
  config.command = [](int local_rank) {
    return local_rank == 1
               ? std::vector<std::string>{DDPRUN_FAKE_WORKER, "--timer-request",
                                          R"({"version": 1, "pid": $PID, "scope_id": "step", )"
                                          R"("expiration_time": 1, "signal": 9})",
                                          "--hang"}
               : std::vector<std::string>{DDPRUN_FAKE_WORKER, "--hang"};
  };
  const auto started = Clock::now();
  const RunResult result = Agent(config).run();
  EXPECT_LT(secondsSince(started), 4.0);
  EXPECT_EQ(result.exit_code, 128 + SIGKILL);
  ASSERT_EQ(result.failures.size(), 1u);
  EXPECT_EQ(result.failures.front().rank, 1);
  EXPECT_EQ(result.failures.front().verdict.reason,
            "timed out in scope 'step' (file timer; SIGKILL sent) (stack below)");
  // Every local worker's stacks were taken before the signal went: the
  // timed-out one's in the verdict, the other's named beside it.
  EXPECT_NE(result.failures.front().verdict.stack.find("eu-stack -p "), std::string::npos)
      << result.failures.front().verdict.stack;
  EXPECT_NE(result.failures.front().verdict.peer_stacks.find("local rank 0 (pid "),
            std::string::npos)
      << result.failures.front().verdict.peer_stacks;
  EXPECT_FALSE(std::filesystem::exists(fifo)) << "the pipe is removed with the agent";
}

// Acquired for 0.5 s, released at once, then 1.5 s of work: not killed.
TEST(AgentWatchdogTest, AReleasedFileTimerNeverFires) {
  test_support::TempDir dir;
  FakeRendezvous rendezvous(singleNode(1));
  const RunResult result = Agent(watchedConfig(rendezvous, 1,
                                               {"--timer-request",
                                                R"({"version": 1, "pid": $PID, "scope_id": "s", )"
                                                R"("expiration_time": $DEADLINE, "signal": 9})",
                                                "--timer-request",
                                                R"({"version": 1, "pid": $PID, "scope_id": "s", )"
                                                R"("expiration_time": -1, "signal": 0})",
                                                "--tick", "100", "15"},
                                               0, (dir.path() / "timer").string()))
                               .run();
  EXPECT_EQ(result.exit_code, 0);
  EXPECT_TRUE(result.failures.empty());
}

// torch would signal any pid a request names; ddprun only its own workers'.
// The worker names a bystander first, then itself: once the worker is dead,
// the bystander's timer was handled too, and the bystander must still run.
TEST(AgentWatchdogTest, AFileTimerNeverSignalsAProcessOutsideTheJob) {
  test_support::TempDir dir;
  SpawnOptions options;
  options.argv = {DDPRUN_FAKE_WORKER, "--hang"};
  Subprocess bystander(options);
  FakeRendezvous rendezvous(singleNode(1));
  const std::string other = std::to_string(bystander.pid());
  const RunResult result =
      Agent(watchedConfig(rendezvous, 1,
                          {"--timer-request",
                           R"({"version": 1, "pid": )" + other +
                               R"(, "scope_id": "x", "expiration_time": 1, "signal": 9})",
                           "--timer-request",
                           R"({"version": 1, "pid": $PID, "scope_id": "y", )"
                           R"("expiration_time": 1, "signal": 9})",
                           "--hang"},
                          0, (dir.path() / "timer").string()))
          .run();
  ASSERT_EQ(result.failures.size(), 1u);
  EXPECT_EQ(result.failures.front().verdict.reason,
            "timed out in scope 'y' (file timer; SIGKILL sent) (stack below)");
  EXPECT_FALSE(bystander.tryWait()) << "the bystander was signalled";
}

}  // namespace
}  // namespace ddprun::launcher

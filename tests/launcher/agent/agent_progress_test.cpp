// Progress with real worker processes (fake_worker, which reports steps to
// DDPRUN_PROGRESS_EVENTS) and a scripted rendezvous. --progress-timeout: a
// worker that reported progress, then none while its CPU stays busy, is
// hung; the stacks of every local worker are taken before it is killed, and
// each lands in its own attempt directory; the report names the rank that
// fell behind. --max-unproductive-restarts: failed attempts that get no
// further than the best step before them end the job as a crash loop.
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

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using testing::FakeRendezvous;
using testing::singleNode;

// Workers that report progress into `dir`/progress and keep an error file
// (so a stack file) in `dir`/attempt_N/<local rank>/.
AgentConfig progressConfig(Rendezvous& rendezvous, const fs::path& dir, int nproc,
                           std::vector<std::string> worker_args, int max_restarts = 0) {
  AgentConfig config = testing::fakeWorkerConfig(rendezvous, nproc, std::move(worker_args),
                                                 max_restarts, {}, {{"PATH", "/usr/bin:/bin"}});
  fs::create_directories(dir / "progress");
  config.environment.reportProgressTo(dir / "progress");
  config.output = [dir](int local_rank, int, int attempt) {
    const fs::path worker_dir =
        dir / ("attempt_" + std::to_string(attempt)) / std::to_string(local_rank);
    fs::create_directories(worker_dir);
    WorkerOutput output;
    output.stdout_may_be_terminal = false;
    output.stderr_may_be_terminal = false;
    output.error_file = (worker_dir / "error.json").string();
    return output;
  };
  return config;
}

double secondsSince(Clock::time_point start, Clock::time_point end) {
  return std::chrono::duration<double>(end - start).count();
}

// Rank 1 reports 5 steps, then spins (busy CPU, no output, no progress),
// as a rank stuck while NCCL's threads spin; rank 0 reports 6, then waits
// idle, as its peers do in the collective rank 1 never joins.
const std::vector<std::string> kRankOneFallsBehind = {"--progress-rank", "0", "6",     "50",
                                                      "--progress-rank", "1", "5",     "50",
                                                      "--spin-rank",     "1", "60000", "--hang"};

TEST(AgentProgressTest, ABusyWorkerThatStopsReportingIsHungAndEveryStackIsKept) {
  test_support::TempDir dir("ddprun-agent-progress");
  FakeRendezvous rendezvous(singleNode(2));
  AgentConfig config = progressConfig(rendezvous, dir.path(), 2, kRankOneFallsBehind);
  config.progress_timeout = ProgressTimeout::fixed(1500ms);
  const auto started = Clock::now();
  const RunResult result = Agent(config).run();

  EXPECT_EQ(result.exit_code, 128 + SIGKILL);
  ASSERT_FALSE(result.failures.empty());
  const WorkerFailure& failure = result.failures.front();
  EXPECT_EQ(failure.rank, 1);
  EXPECT_EQ(failure.status, (ExitStatus{ExitStatus::Kind::Signaled, SIGKILL}));
  // How long it was silent is what a tick saw: the timeout, or a tick more.
  EXPECT_EQ(failure.verdict.reason.rfind("hung: no progress for 1.", 0), 0u)
      << failure.verdict.reason;
  EXPECT_NE(failure.verdict.reason.find(
                " s after step 5, its CPU busy (progress timeout 1.5 s) (stack below)"),
            std::string::npos)
      << failure.verdict.reason;
  // Steps took 0.3 s; the timeout 1.5 s; a tick is 0.19 s; stacks take
  // what eu-stack takes (the bound asked for is 2 s more than the timeout).
  const double detected = secondsSince(started, failure.monotonic);
  EXPECT_GE(detected, 1.7);
  EXPECT_LT(detected, 0.3 + 1.5 + 2.0 + 1.0) << "spawning included";

  // Every local worker's stacks, each in its own attempt directory.
  for (const char* local_rank : {"0", "1"}) {
    const fs::path stack = dir / "attempt_0" / local_rank / "stack.txt";
    ASSERT_TRUE(fs::exists(stack)) << stack;
    EXPECT_NE(test_support::readFile(stack).find("eu-stack -p "), std::string::npos)
        << test_support::readFile(stack);
  }
  EXPECT_EQ(failure.verdict.stack_file, (dir / "attempt_0" / "1" / "stack.txt").string());
  const std::string report = formatFailureReport(result, "host0", "train");
  EXPECT_NE(report.find("rank      : 1 (local_rank: 1)"), std::string::npos) << report;
  EXPECT_NE(report.find("  peers     : where the other ranks were (this node's, then the other "
                        "nodes')\n    local rank 0 (pid "),
            std::string::npos)
      << report;
  EXPECT_NE(report.find((dir / "attempt_0" / "0" / "stack.txt").string()), std::string::npos)
      << report;
}

// Both ranks reach step 5; rank 0 then sleeps (as a rank waiting in a Gloo
// collective does) and was silent first, rank 1 spins: the busy one is the
// hung one, and the one the report names.
TEST(AgentProgressTest, AmongRanksStalledAtTheSameStepTheBusyOneIsJudged) {
  test_support::TempDir dir("ddprun-agent-progress");
  FakeRendezvous rendezvous(singleNode(2));
  AgentConfig config = progressConfig(rendezvous, dir.path(), 2,
                                      {"--progress-rank", "0", "5", "40", "--progress-rank", "1",
                                       "5", "80", "--spin-rank", "1", "60000", "--hang"});
  config.progress_timeout = ProgressTimeout::fixed(1500ms);
  config.tools_path = "/nonexistent";  // no stacks: the judgment alone
  const RunResult result = Agent(config).run();
  ASSERT_FALSE(result.failures.empty());
  EXPECT_EQ(result.failures.front().rank, 1) << result.failures.front().verdict.reason;
  EXPECT_NE(result.failures.front().verdict.reason.find("its CPU busy"), std::string::npos)
      << result.failures.front().verdict.reason;
}

TEST(AgentProgressTest, AWorkerThatNeverReportedProgressIsNotJudgedByIt) {
  test_support::TempDir dir("ddprun-agent-progress");
  FakeRendezvous rendezvous(singleNode(1));
  AgentConfig config = progressConfig(rendezvous, dir.path(), 1, {"--spin", "1500"});
  config.progress_timeout = ProgressTimeout::fixed(300ms);
  const RunResult result = Agent(config).run();
  EXPECT_EQ(result.exit_code, 0);
  EXPECT_TRUE(result.failures.empty());
}

TEST(AgentProgressTest, AWorkerThatKeepsReportingIsNotHung) {
  test_support::TempDir dir("ddprun-agent-progress");
  FakeRendezvous rendezvous(singleNode(1));
  AgentConfig config = progressConfig(rendezvous, dir.path(), 1, {"--progress", "20", "100"});
  config.progress_timeout = ProgressTimeout::fixed(600ms);
  const RunResult result = Agent(config).run();
  EXPECT_EQ(result.exit_code, 0);
  EXPECT_TRUE(result.failures.empty());
}

// auto with a floor of 0.5 s: steps 0.05 s apart make the learned timeout
// the floor (5 x 0.05 s is less), 10 x that for the first step.
TEST(AgentProgressTest, AnAutomaticTimeoutIsLearnedFromTheSteps) {
  test_support::TempDir dir("ddprun-agent-progress");
  FakeRendezvous rendezvous(singleNode(2));
  AgentConfig config = progressConfig(rendezvous, dir.path(), 2, kRankOneFallsBehind);
  config.progress_timeout = ProgressTimeout::automatic(500ms);
  config.tools_path = "/nonexistent";  // no stacks: the timing is the watch's alone
  const auto started = Clock::now();
  const RunResult result = Agent(config).run();
  ASSERT_FALSE(result.failures.empty());
  const WorkerFailure& failure = result.failures.front();
  EXPECT_EQ(failure.rank, 1);
  EXPECT_NE(failure.verdict.reason.find("auto: 0.5 s"), std::string::npos)
      << failure.verdict.reason;
  const double detected = secondsSince(started, failure.monotonic);
  EXPECT_LT(detected, 0.3 + 0.5 + 2.0) << failure.verdict.reason;
}

// A restarted group resumes being watched: the stall of attempt 0 is
// restarted like a crash, and attempt 1 ends well.
TEST(AgentProgressTest, AStallIsRestartedLikeACrash) {
  test_support::TempDir dir("ddprun-agent-progress");
  FakeRendezvous rendezvous(singleNode(1));
  AgentConfig config = progressConfig(
      rendezvous, dir.path(), 1,
      {"--progress", "3", "50", "--exit-if-attempt", "1", "0", "--spin", "60000"}, 1);
  config.progress_timeout = ProgressTimeout::fixed(700ms);
  config.tools_path = "/nonexistent";
  const RunResult result = Agent(config).run();
  EXPECT_EQ(result.exit_code, 0);
  EXPECT_EQ(result.attempts, 2);
}

// A worker that crashes at the same step on every attempt: attempt 0 got
// somewhere (step 4), attempts 1, 2 and 3 got no further, so the job ends
// after the third unproductive restart, whatever --max-restarts allows.
TEST(AgentProgressTest, ACrashAtTheSameStepEveryAttemptEndsAsACrashLoop) {
  test_support::TempDir dir("ddprun-agent-progress");
  FakeRendezvous rendezvous(singleNode(2));
  AgentConfig config = progressConfig(
      rendezvous, dir.path(), 2, {"--progress", "4", "20", "--only-rank", "1", "--exit", "3"}, 100);
  config.tools_path = "/nonexistent";
  const RunResult result = Agent(config).run();
  EXPECT_EQ(result.exit_code, kCrashLoopExitCode);
  EXPECT_EQ(result.attempts, 4) << "attempt 0, then 3 unproductive restarts";
  EXPECT_EQ(result.crash_loop,
            "crash loop: 3 attempt(s) in a row failed without getting past step 4 (this one "
            "reached step 4); not restarted again (--max-unproductive-restarts 3)");
  ASSERT_FALSE(result.failures.empty());
  EXPECT_EQ(result.failures.front().rank, 1);
}

// Each attempt gets further than the one before (it resumes and moves on):
// restarted as long as --max-restarts allows.
TEST(AgentProgressTest, FailuresThatStillMakeProgressAreRestarted) {
  test_support::TempDir dir("ddprun-agent-progress");
  FakeRendezvous rendezvous(singleNode(1));
  // Attempt A reports steps 1..(A+1)*2 before it fails; attempt 5 succeeds.
  AgentConfig config = progressConfig(rendezvous, dir.path(), 1, {}, 5);
  config.command = [](int) {
    return std::vector<std::string>{
        "/bin/sh", "-c",
        "a=$TORCHELASTIC_RESTART_COUNT; n=$(( (a + 1) * 2 )); i=1; "
        "while [ $i -le $n ]; do echo '{\"name\": \"progress\", \"step\": '$i'}' "
        ">> \"$DDPRUN_PROGRESS_EVENTS\"; i=$((i + 1)); done; [ $a -ge 5 ] || exit 3"};
  };
  config.max_unproductive_restarts = 1;
  const RunResult result = Agent(config).run();
  EXPECT_EQ(result.exit_code, 0) << result.crash_loop;
  EXPECT_EQ(result.attempts, 6);
}

// No worker ever reports progress: the rule cannot tell a crash loop from
// anything else, and --max-restarts alone decides.
TEST(AgentProgressTest, WithoutProgressReportsOnlyMaxRestartsCounts) {
  test_support::TempDir dir("ddprun-agent-progress");
  FakeRendezvous rendezvous(singleNode(1));
  AgentConfig config = progressConfig(rendezvous, dir.path(), 1, {"--exit", "3"}, 5);
  const RunResult result = Agent(config).run();
  EXPECT_EQ(result.exit_code, 3);
  EXPECT_EQ(result.attempts, 6);
  EXPECT_TRUE(result.crash_loop.empty());
}

// A worker that reports no steps, only its snapshots, as a script that
// reports where it saves: every attempt saves the snapshot of step 40 again
// and fails, so the snapshots judge it a crash loop. A later attempt that
// saves a newer one would have been productive.
TEST(AgentProgressTest, WithoutStepsTheSnapshotsJudgeACrashLoop) {
  test_support::TempDir dir("ddprun-agent-progress");
  FakeRendezvous rendezvous(singleNode(1));
  AgentConfig config = progressConfig(rendezvous, dir.path(), 1, {}, 100);
  config.command = [](int) {
    return std::vector<std::string>{
        "/bin/sh", "-c",
        "echo '{\"name\": \"snapshot\", \"step\": 40}' >> \"$DDPRUN_PROGRESS_EVENTS\"; exit 3"};
  };
  const RunResult result = Agent(config).run();
  EXPECT_EQ(result.exit_code, kCrashLoopExitCode);
  EXPECT_EQ(result.attempts, 4) << "attempt 0, then 3 unproductive restarts";
  EXPECT_EQ(result.crash_loop,
            "crash loop: 3 attempt(s) in a row failed without getting past the snapshot of step "
            "40 (this one reached the snapshot of step 40); not restarted again "
            "(--max-unproductive-restarts 3)");
}

TEST(AgentProgressTest, ZeroUnproductiveRestartsNeverEndsACrashLoop) {
  test_support::TempDir dir("ddprun-agent-progress");
  FakeRendezvous rendezvous(singleNode(1));
  AgentConfig config =
      progressConfig(rendezvous, dir.path(), 1, {"--progress", "2", "10", "--exit", "3"}, 5);
  config.max_unproductive_restarts = 0;
  const RunResult result = Agent(config).run();
  EXPECT_EQ(result.exit_code, 3);
  EXPECT_EQ(result.attempts, 6);
}

// A node whose health check fails before a join starts no worker there and
// ends with kUnfitExitCode; asked before every join, the first included.
TEST(AgentHealthTest, AnUnfitNodeNeverJoinsAndEndsWithItsOwnStatus) {
  test_support::TempDir dir("ddprun-agent-health");
  FakeRendezvous rendezvous(singleNode(1));
  AgentConfig config = progressConfig(rendezvous, dir.path(), 1, {"--exit", "3"}, 2);
  std::vector<int> asked;
  config.health_check = [&asked](int join) -> std::optional<std::string> {
    asked.push_back(join);
    if (join < 2) {
      return std::nullopt;
    }
    return "GPU 3 is gone";
  };
  const RunResult result = Agent(config).run();
  EXPECT_EQ(result.exit_code, kUnfitExitCode);
  EXPECT_TRUE(result.left_unfit);
  EXPECT_EQ(result.attempts, 2) << "attempts 0 and 1 ran; the third join was refused";
  EXPECT_EQ(asked, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(result.error, "this node failed its health check and does not join: GPU 3 is gone");
}

}  // namespace
}  // namespace ddprun::launcher

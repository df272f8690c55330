// The ddprun executable's watchdogs end to end with fake workers
// (docs/torchrun-contract.md §7.6): --worker-hang-timeout finds a silent,
// idle worker, reports it with its rank, "hung" and a stack (also saved next
// to its error file), exits 128 + SIGKILL, or restarts it with
// --max-restarts; a printing or spinning worker is left alone. The file timer
// (TORCHELASTIC_ENABLE_FILE_TIMER=1) serves the given pipe, warns once about
// lines that are not requests, kills on expiry and removes the pipe.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "ddprun/test_support/files.hpp"
#include "ddprun_binary_fixture.hpp"

namespace ddprun::launcher {
namespace {

using namespace std::chrono_literals;
using test_support::readFile;
using testing::countOf;
using testing::DdprunBinaryTest;
using testing::Outcome;
using testing::runDir;

std::vector<std::string> withFlags(std::vector<std::string> flags, std::vector<std::string> args) {
  flags.insert(flags.end(), args.begin(), args.end());
  return flags;
}

TEST_F(DdprunBinaryTest, AHungWorkerIsReportedWithItsRankAndStack) {
  const auto log_dir = dir_.path() / "logs";
  const auto started = std::chrono::steady_clock::now();
  const Outcome outcome =
      runFor(withFlags({"--worker-hang-timeout", "1", "--log-dir", log_dir.string()},
                       fakeWorkers(2, {"--only-rank", "1", "--hang"})),
             30s);
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  EXPECT_EQ(outcome.status, (ExitStatus{ExitStatus::Kind::Exited, 128 + SIGKILL}))
      << outcome.stderr_text;
  EXPECT_LT(took, 10.0) << "found within about a second or two, plus eu-stack's time";
  const std::string& err = outcome.stderr_text;
  EXPECT_NE(err.find("local rank 1 (pid "), std::string::npos) << err;
  EXPECT_NE(err.find("rank      : 1 (local_rank: 1)"), std::string::npos) << err;
  EXPECT_NE(err.find("reason    : hung: no output and no CPU time for 1 s (stack below); killed "
                     "by SIGKILL (signal 9)"),
            std::string::npos)
      << err;
  const auto stack_file = runDir(log_dir) / "attempt_0" / "1" / "stack.txt";
  EXPECT_NE(err.find("stack     : (also in " + stack_file.string() + ")"), std::string::npos)
      << err;
  const std::string stack = readFile(stack_file);
  if (std::filesystem::exists("/usr/bin/eu-stack")) {
    EXPECT_EQ(stack.rfind("$ /usr/bin/eu-stack -p ", 0), 0u) << stack;
    EXPECT_NE(stack.find("#0 "), std::string::npos) << stack;
    EXPECT_NE(err.find("    #0 "), std::string::npos) << "the frames are in the report: " << err;
  } else {
    EXPECT_EQ(stack, "no stack: neither eu-stack nor gdb is on PATH\n");
  }
}

// The timeout from PET_WORKER_HANG_TIMEOUT, as every flag has its variable.
TEST_F(DdprunBinaryTest, AHungWorkerIsRestartedWithMaxRestarts) {
  extra_env_ = {{"PET_WORKER_HANG_TIMEOUT", "1"}};
  const Outcome outcome =
      runFor(withFlags({"--max-restarts", "1"},
                       fakeWorkers(2, {"--only-rank", "0", "--only-attempt", "0", "--hang"})),
             30s);
  EXPECT_TRUE(outcome.status.success()) << outcome.stderr_text;
  EXPECT_NE(outcome.stderr_text.find("restarting the worker group (attempt 1)"), std::string::npos)
      << outcome.stderr_text;
}

// A line every 0.3 s for 3 s; then 3 s of silent CPU use.
TEST_F(DdprunBinaryTest, PrintingOrSpinningWorkersAreNotHung) {
  Outcome outcome = runFor(
      withFlags({"--worker-hang-timeout", "1"}, fakeWorkers(1, {"--tick", "300", "10"})), 30s);
  EXPECT_TRUE(outcome.status.success()) << outcome.stderr_text;
  EXPECT_EQ(countOf(outcome.stdout_text, " tick "), 10);
  outcome =
      runFor(withFlags({"--worker-hang-timeout", "1"}, fakeWorkers(1, {"--spin", "3000"})), 30s);
  EXPECT_TRUE(outcome.status.success()) << outcome.stderr_text;
}

TEST_F(DdprunBinaryTest, TheFileTimerWarnsOnceAboutJunkAndKillsOnExpiry) {
  const auto fifo = dir_.path() / "timer";
  extra_env_ = {{"TORCHELASTIC_ENABLE_FILE_TIMER", "1"},
                {"TORCHELASTIC_TIMER_FILE", fifo.string()}};
  const Outcome outcome =
      runFor(fakeWorkers(1, {"--timer-request", "junk", "--timer-request", R"({"pid": 1})",
                             "--timer-request",
                             R"({"version": 1, "pid": $PID, "scope_id": "train.py#7", )"
                             R"("expiration_time": 1, "signal": 9})",
                             "--hang"}),
             30s);
  EXPECT_EQ(outcome.status, (ExitStatus{ExitStatus::Kind::Exited, 128 + SIGKILL}))
      << outcome.stderr_text;
  EXPECT_EQ(countOf(outcome.stderr_text, "file timer: ignoring a request"), 1)
      << outcome.stderr_text;
  EXPECT_NE(outcome.stderr_text.find(
                "reason    : timed out in scope 'train.py#7' (file timer; SIGKILL sent) (stack "
                "below); killed by SIGKILL (signal 9)"),
            std::string::npos)
      << outcome.stderr_text;
  EXPECT_FALSE(std::filesystem::exists(fifo)) << "the pipe outlived the agent";
}

// The few lines docs/launcher.md gives a Python script, as they are: rank 1
// reports 5 steps, then spins (busy, silent); rank 0 reports 6, then waits.
constexpr const char* kSpinningRank = R"(import json, os, time

progress_file = os.environ.get("DDPRUN_PROGRESS_EVENTS")  # unset under other launchers

def report_progress(step):
    if progress_file:
        with open(progress_file, "a") as f:
            f.write(json.dumps({"name": "progress", "step": step,
                                "ts_monotonic_ns": time.monotonic_ns()}) + "\n")

rank = int(os.environ["RANK"])
for step in range(1, 7 - rank):
    time.sleep(0.05)
    report_progress(step)
while rank == 1:
    pass
time.sleep(120)
)";

TEST_F(DdprunBinaryTest, APythonRankThatSpinsWithoutProgressIsHungAndEveryStackIsKept) {
  const auto script = dir_.path() / "spin.py";
  std::ofstream(script) << kSpinningRank;
  extra_env_ = {{"PYTHON_EXEC", DDPRUN_TORCH_PYTHON}};
  const auto log_dir = dir_.path() / "logs";
  const Outcome outcome = runFor({"--standalone", "--nproc-per-node", "2", "--progress-timeout",
                                  "1.5", "--log-dir", log_dir.string(), script.string()},
                                 60s);
  const std::string& err = outcome.stderr_text;
  // SIGABRT: faulthandler (armed by ddprun) prints the Python stack first.
  EXPECT_EQ(outcome.status, (ExitStatus{ExitStatus::Kind::Exited, 128 + SIGABRT})) << err;
  EXPECT_NE(err.find("rank      : 1 (local_rank: 1)"), std::string::npos) << err;
  EXPECT_NE(err.find("reason    : hung: no progress for "), std::string::npos) << err;
  EXPECT_NE(err.find(" after step 5, its CPU busy (progress timeout 1.5 s) (stack below); killed "
                     "by SIGABRT"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("  python    : every thread's Python stack"), std::string::npos) << err;
  EXPECT_NE(err.find("  File \"" + script.string() + "\", line "), std::string::npos)
      << "faulthandler's frames, on the ranks' stderr: " << err;
  for (const char* local_rank : {"0", "1"}) {
    EXPECT_TRUE(std::filesystem::exists(runDir(log_dir) / "attempt_0" / local_rank / "stack.txt"))
        << local_rank;
  }
  EXPECT_NE(err.find("local rank 0 (pid "), std::string::npos) << err;
}

// No run directory: the progress files live in a private directory under
// $TMPDIR for the run, and are gone after it.
TEST_F(DdprunBinaryTest, ProgressIsWatchedWithoutLogFilesAndLeavesNothingBehind) {
  const auto script = dir_.path() / "spin.py";
  std::ofstream(script) << kSpinningRank;
  const auto tmp = dir_.path() / "tmp";
  std::filesystem::create_directories(tmp);
  extra_env_ = {{"PYTHON_EXEC", DDPRUN_TORCH_PYTHON}, {"TMPDIR", tmp.string()}};
  const Outcome outcome = runFor({"--standalone", "--nproc-per-node", "2", "--progress-timeout",
                                  "1", "--log-dir", "/dev/null", script.string()},
                                 60s);
  EXPECT_EQ(outcome.status, (ExitStatus{ExitStatus::Kind::Exited, 128 + SIGABRT}))
      << outcome.stderr_text;
  EXPECT_NE(outcome.stderr_text.find("after step 5, its CPU busy (progress timeout 1 s)"),
            std::string::npos)
      << outcome.stderr_text;
  EXPECT_TRUE(std::filesystem::is_empty(tmp)) << "the progress directory was left behind";
}

}  // namespace
}  // namespace ddprun::launcher

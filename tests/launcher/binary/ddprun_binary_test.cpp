// The ddprun executable end to end with fake workers (--no-python): exit
// status, one-line errors, the failure report, no orphan after the agent is
// SIGKILLed, and a forwarded SIGTERM.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include "ddprun/launcher/process/subprocess.hpp"
#include "ddprun/test_support/eventually.hpp"
#include "ddprun/test_support/files.hpp"
#include "ddprun/test_support/proc_status.hpp"
#include "ddprun/test_support/temp_dir.hpp"
#include "ddprun_binary_fixture.hpp"

namespace ddprun::launcher {
namespace {

using namespace std::chrono_literals;
using test_support::readFile;
using testing::countOf;
using testing::DdprunBinaryTest;
using testing::Outcome;
using testing::runDir;

TEST_F(DdprunBinaryTest, SucceedsWithZero) {
  const Outcome outcome = run(fakeWorkers(3, {}));
  EXPECT_TRUE(outcome.status.success()) << outcome.stderr_text;
}

TEST_F(DdprunBinaryTest, RootCauseExitCodeAndReport) {
  const Outcome outcome = run(fakeWorkers(3, {"--only-rank", "1", "--exit", "3"}));
  EXPECT_EQ(outcome.status, (ExitStatus{ExitStatus::Kind::Exited, 3}));
  EXPECT_NE(outcome.stderr_text.find("Root Cause (first observed failure)"), std::string::npos)
      << outcome.stderr_text;
  EXPECT_NE(outcome.stderr_text.find("rank      : 1 (local_rank: 1)"), std::string::npos);
}

TEST_F(DdprunBinaryTest, WorkerKilledBySignalExitsOneTwentyEightPlusSignal) {
  const Outcome outcome = run(fakeWorkers(2, {"--only-rank", "0", "--signal", "6"}));
  EXPECT_EQ(outcome.status, (ExitStatus{ExitStatus::Kind::Exited, 128 + SIGABRT}));
  EXPECT_NE(outcome.stderr_text.find("SIGABRT"), std::string::npos) << outcome.stderr_text;
}

TEST_F(DdprunBinaryTest, BadFlagIsOneLinePlusUsageAndExitTwo) {
  const Outcome outcome = run({"--nproc-per-node", "banana", "train.py"});
  EXPECT_EQ(outcome.status, (ExitStatus{ExitStatus::Kind::Exited, 2}));
  EXPECT_EQ(outcome.stderr_text.rfind("ddprun: --nproc-per-node 'banana'", 0), 0u)
      << outcome.stderr_text;
  EXPECT_NE(outcome.stderr_text.find("usage: ddprun"), std::string::npos);
}

// etcd-v3 across nodes runs; a setting etcd cannot use is a bad flag: one
// line and exit 2, before any connection is tried.
TEST_F(DdprunBinaryTest, AnEtcdProtocolOtherThanHttpIsOneLineAndExitTwo) {
  const Outcome outcome =
      run({"--nnodes", "2", "--rdzv-backend", "etcd-v2", "--rdzv-endpoint", "127.0.0.1:1",
           "--rdzv-conf", "protocol=ftp", "--no-python", DDPRUN_FAKE_WORKER});
  EXPECT_EQ(outcome.status, (ExitStatus{ExitStatus::Kind::Exited, 2}));
  // Checked with the flags: the first line, before anything starts (the usage follows).
  const std::string line = "ddprun: --rdzv-conf protocol 'ftp': etcd speaks http or https\n";
  EXPECT_TRUE(outcome.stderr_text.starts_with(line)) << outcome.stderr_text;
}

// This test process is a subreaper, so workers orphaned by the agent's death
// are reparented here and their end can be read with waitpid.
TEST_F(DdprunBinaryTest, NoWorkerSurvivesTheAgentsSigkill) {
  ASSERT_EQ(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
  Subprocess agent = start(fakeWorkers(3, {"--ready-to", dir_.path().string(), "--hang"}));
  std::vector<pid_t> workers;
  ASSERT_TRUE(test_support::eventually(
      [&] {
        workers.clear();
        for (int rank = 0; rank < 3; ++rank) {
          const std::string pid = readFile(dir_.path() / (std::to_string(rank) + ".ready"));
          if (pid.empty()) {
            return false;
          }
          workers.push_back(std::stoi(pid));
        }
        return true;
      },
      10s));
  const pid_t agent_process = test_support::ddprunAgentOf(agent.pid());
  ASSERT_TRUE(agent.signalGroup(SIGKILL));  // the agent's own group: not its workers'
  EXPECT_EQ(agent.wait(), (ExitStatus{ExitStatus::Kind::Signaled, SIGKILL}));
  if (agent_process != agent.pid()) {
    // Reparented here with ddprun's pid gone; its workers will be once it is.
    ASSERT_EQ(waitpid(agent_process, nullptr, 0), agent_process);
  }
  for (pid_t worker : workers) {
    int status = 0;
    ASSERT_EQ(waitpid(worker, &status, 0), worker) << "worker " << worker << " is not ours";
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "worker " << worker;
  }
  prctl(PR_SET_CHILD_SUBREAPER, 0);
}

TEST_F(DdprunBinaryTest, SigtermIsForwardedAndTheExitStatusSaysSo) {
  Subprocess agent = start(fakeWorkers(2, {"--ready-to", dir_.path().string(), "--hang"}));
  ASSERT_TRUE(test_support::eventually(
      [&] {
        return std::filesystem::exists(dir_.path() / "0.ready") &&
               std::filesystem::exists(dir_.path() / "1.ready");
      },
      10s));
  ASSERT_EQ(kill(agent.pid(), SIGTERM), 0);
  const Outcome outcome = waitFor(agent, 20s);
  EXPECT_EQ(outcome.status.describe(), "exited with code " + std::to_string(128 + SIGTERM))
      << outcome.stderr_text;
  // The agent says what it does with the signal, once.
  EXPECT_EQ(countOf(outcome.stderr_text,
                    "received SIGTERM: forwarding it to the workers and stopping them (a second "
                    "one kills them at once)"),
            1)
      << outcome.stderr_text;
}

// More workers than this machine lets ddprun supervise (descriptors,
// processes, pids): refused before anything is forked, one line naming the
// limit and the number, exit 2. It used to fork for 51 s, then fail on a pipe.
TEST_F(DdprunBinaryTest, MoreWorkersThanTheMachineAllowsAreRefusedAtOnce) {
  const auto started = std::chrono::steady_clock::now();
  const Outcome outcome = runFor(fakeWorkers(100000, {}), 5s);
  EXPECT_LT(std::chrono::steady_clock::now() - started, 1s);
  EXPECT_EQ(outcome.status.describe(), "exited with code 2") << outcome.stderr_text;
  EXPECT_EQ(outcome.stderr_text.rfind("ddprun: --nproc-per-node 100000: ", 0), 0u)
      << outcome.stderr_text;
  EXPECT_NE(outcome.stderr_text.find("limit"), std::string::npos) << outcome.stderr_text;
  EXPECT_EQ(countOf(outcome.stderr_text, "\n"), 1) << outcome.stderr_text;
}

// ddprun started with too few descriptors for its workers (as `ulimit -n 64`
// would): one line naming RLIMIT_NOFILE and the numbers, exit 2, no worker.
TEST_F(DdprunBinaryTest, TooFewDescriptorsForTheWorkersAreRefusedUpFront) {
  rlimit saved{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &saved), 0);
  rlimit lowered = saved;
  lowered.rlim_cur = 64;
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &lowered), 0);
  std::optional<Subprocess> agent;
  try {
    agent.emplace(start(fakeWorkers(20, {"--ready-to", dir_.path().string()})));
  } catch (...) {
    setrlimit(RLIMIT_NOFILE, &saved);
    throw;
  }
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &saved), 0);  // only the child has the low limit
  const Outcome outcome = waitFor(*agent, 20s);
  EXPECT_EQ(outcome.status.describe(), "exited with code 2") << outcome.stderr_text;
  EXPECT_EQ(outcome.stderr_text.rfind("ddprun: --nproc-per-node 20: ", 0), 0u)
      << outcome.stderr_text;
  EXPECT_NE(outcome.stderr_text.find("RLIMIT_NOFILE"), std::string::npos) << outcome.stderr_text;
  EXPECT_NE(outcome.stderr_text.find("64"), std::string::npos) << outcome.stderr_text;
  EXPECT_EQ(countOf(outcome.stderr_text, "\n"), 1) << outcome.stderr_text;
  EXPECT_FALSE(std::filesystem::exists(dir_.path() / "0.ready")) << "a worker was started";
}

// With no GPU: one clear line and exit 2; with GPUs: one worker per GPU.
TEST_F(DdprunBinaryTest, NprocGpuCountsVisibleGpusOrSaysWhyNone) {
  const proto::VisibleGpus gpus = testing::gpusVisibleHere();
  const auto log_dir = dir_.path() / "logs";
  const Outcome outcome = run({"--nproc-per-node", "gpu", "--log-dir", log_dir.string(),
                               "--standalone", "--no-python", DDPRUN_FAKE_WORKER});
  if (gpus.count == 0) {
    EXPECT_EQ(outcome.status.code, 2);
    EXPECT_NE(
        outcome.stderr_text.find("--nproc-per-node gpu: no CUDA GPU is visible: " + gpus.why_none),
        std::string::npos)
        << outcome.stderr_text;
  } else {
    EXPECT_TRUE(outcome.status.success()) << outcome.stderr_text;
    EXPECT_TRUE(
        std::filesystem::exists(runDir(log_dir) / "attempt_0" / std::to_string(gpus.count - 1)));
  }
}

TEST_F(DdprunBinaryTest, ConsoleGetsWholeLinesFromEveryWorker) {
  const Outcome outcome = run(fakeWorkers(4, {"--chatter", "200"}));
  ASSERT_TRUE(outcome.status.success()) << outcome.stderr_text;
  std::istringstream lines(outcome.stdout_text);
  int count = 0;
  for (std::string line; std::getline(lines, line); ++count) {
    ASSERT_EQ(line.rfind("rank ", 0), 0u) << "torn line: " << line;
    ASSERT_EQ(line.substr(line.size() - 4), " end") << "torn line: " << line;
  }
  EXPECT_EQ(count, 4 * 200);
}

TEST_F(DdprunBinaryTest, RedirectsGoToTheLogDirectoryOnly) {
  const auto log_dir = dir_.path() / "logs";
  auto args = fakeWorkers(2, {"--chatter", "3"});
  args.insert(args.begin(), {"--log-dir", log_dir.string(), "-r", "3"});
  const Outcome outcome = run(args);
  ASSERT_TRUE(outcome.status.success()) << outcome.stderr_text;
  EXPECT_EQ(outcome.stdout_text, "");
  EXPECT_EQ(countOf(outcome.stderr_text, "says stderr"), 0);
  for (int rank = 0; rank < 2; ++rank) {
    const auto worker_dir = runDir(log_dir) / "attempt_0" / std::to_string(rank);
    EXPECT_EQ(countOf(readFile(worker_dir / "stdout.log"), " end\n"), 3) << worker_dir;
    EXPECT_EQ(readFile(worker_dir / "stderr.log"),
              "rank " + std::to_string(rank) + " says stderr\n");
  }
}

TEST_F(DdprunBinaryTest, TeePrefixesConsoleLinesAndTheFilterLimitsTheConsoleOnly) {
  const auto log_dir = dir_.path() / "logs";
  auto args = fakeWorkers(2, {"--chatter", "2"});
  args.insert(args.begin(), {"--log-dir", log_dir.string(), "-t", "1", "--log-line-prefix-template",
                             "<${role_name}/${rank}>", "--local-ranks-filter", "1"});
  const Outcome outcome = run(args);
  ASSERT_TRUE(outcome.status.success()) << outcome.stderr_text;
  EXPECT_EQ(outcome.stdout_text, "<default/1>rank 1 line 0 end\n<default/1>rank 1 line 1 end\n");
  EXPECT_EQ(countOf(readFile(runDir(log_dir) / "attempt_0" / "0" / "stdout.log"), " end\n"), 2)
      << "the filter must not limit the files";
}

TEST_F(DdprunBinaryTest, ReportShowsTheWorkersRecordedErrorAndCopiesItUp) {
  const auto own_error_file = dir_.path() / "agent-error.json";
  extra_env_ = {{"TORCHELASTIC_ERROR_FILE", own_error_file.string()}};
  const Outcome outcome = run(fakeWorkers(
      2, {"--only-rank", "1", "--error-json", "Traceback: the cause is here", "--exit", "1"}));
  EXPECT_EQ(outcome.status.code, 1);
  EXPECT_NE(outcome.stderr_text.find("traceback : Traceback: the cause is here"), std::string::npos)
      << outcome.stderr_text;
  EXPECT_NE(readFile(own_error_file).find("the cause is here"), std::string::npos);
}

}  // namespace
}  // namespace ddprun::launcher

// The ddprun executable end to end with fake workers (--no-python): exit
// status, one-line errors, the failure report, no orphan after the agent is
// SIGKILLed, and a forwarded SIGTERM.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "ddprun/launcher/subprocess.hpp"
#include "ddprun/test_support/eventually.hpp"
#include "ddprun/test_support/temp_dir.hpp"

namespace ddprun::launcher {
namespace {

using namespace std::chrono_literals;

struct Outcome {
  ExitStatus status;
  std::string stderr_text;
};

std::string readFile(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

class DdprunBinaryTest : public ::testing::Test {
 protected:
  Subprocess start(std::vector<std::string> args) {
    SpawnOptions options;
    options.argv = {DDPRUN_BINARY};
    options.argv.insert(options.argv.end(), args.begin(), args.end());
    options.env = {{"PATH", "/usr/bin:/bin"}};
    stderr_fd_ = ::open((dir_.path() / "stderr").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    options.stderr_fd = stderr_fd_;
    Subprocess child(options);
    ::close(stderr_fd_);
    return child;
  }

  Outcome run(std::vector<std::string> args) {
    Subprocess child = start(std::move(args));
    const ExitStatus status = child.wait();
    return {status, readFile(dir_.path() / "stderr")};
  }

  std::vector<std::string> fakeWorkers(int nproc, std::vector<std::string> worker_args) {
    std::vector<std::string> args = {"--standalone", "--nproc-per-node", std::to_string(nproc),
                                     "--no-python", DDPRUN_FAKE_WORKER};
    args.insert(args.end(), worker_args.begin(), worker_args.end());
    return args;
  }

  test_support::TempDir dir_;
  int stderr_fd_ = -1;
};

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

TEST_F(DdprunBinaryTest, MultiNodeIsRefusedClearlyUntilImplemented) {
  const Outcome outcome = run({"--nnodes", "2", "--no-python", DDPRUN_FAKE_WORKER});
  EXPECT_EQ(outcome.status, (ExitStatus{ExitStatus::Kind::Exited, 2}));
  EXPECT_NE(outcome.stderr_text.find("multi-node rendezvous is not implemented"), std::string::npos)
      << outcome.stderr_text;
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
  ASSERT_TRUE(agent.signalGroup(SIGKILL));  // the agent's own group: not its workers'
  EXPECT_EQ(agent.wait(), (ExitStatus{ExitStatus::Kind::Signaled, SIGKILL}));
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
  EXPECT_EQ(agent.wait(), (ExitStatus{ExitStatus::Kind::Exited, 128 + SIGTERM}));
}

}  // namespace
}  // namespace ddprun::launcher

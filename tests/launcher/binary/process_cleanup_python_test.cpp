// No process outlives its job, nor its attempt, with python3-torch workers
// (leaky_worker.py): a subprocess, a multiprocessing.Process, a DataLoader's
// workers, a setsid child and a daemon (double fork), under a crash and a
// restart, a SIGTERM of ddprun, a SIGKILL of ddprun and one of its agent
// process; with the cgroup allowed and with DDPRUN_CGROUP=0.
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <fstream>

#include "ddprun/launcher/process/subprocess.hpp"
#include "ddprun/test_support/eventually.hpp"
#include "ddprun/test_support/files.hpp"
#include "ddprun/test_support/proc_status.hpp"
#include "ddprun_binary_fixture.hpp"
#include "leftovers.hpp"

namespace ddprun::launcher {
namespace {

using namespace std::chrono_literals;
using testing::Leftover;
using testing::Outcome;

// GetParam(): whether ddprun may use a cgroup (else DDPRUN_CGROUP=0).
class DdprunPythonLeftoversTest : public testing::DdprunBinaryTest,
                                  public ::testing::WithParamInterface<bool> {
 protected:
  void SetUp() override {
    if (std::string(DDPRUN_TORCH_PYTHON).empty()) {
      GTEST_SKIP() << "no Python interpreter that imports torch (install python3-torch)";
    }
    extra_env_ = {{"PYTHON_EXEC", DDPRUN_TORCH_PYTHON}, {"PYTHONDONTWRITEBYTECODE", "1"}};
    if (!GetParam()) {
      extra_env_.emplace_back("DDPRUN_CGROUP", "0");
    }
  }
  void TearDown() override { testing::killAlive(all_); }

  Subprocess startLeaky(std::vector<std::string> flags, std::vector<std::string> worker_args) {
    flags.insert(flags.end(), {"--standalone", "--nproc-per-node", "1", DDPRUN_LEAKY_WORKER,
                               "--out", dir_.path().string()});
    flags.insert(flags.end(), worker_args.begin(), worker_args.end());
    return start(flags);
  }

  std::vector<Leftover> leftoversOf(int attempt, Subprocess& ddprun) {
    const auto file = dir_.path() / ("leak." + std::to_string(attempt) + ".0");
    test_support::eventually(
        [&] { return std::filesystem::exists(file) || ddprun.tryWait().has_value(); }, 60s);
    EXPECT_TRUE(std::filesystem::exists(file))
        << "attempt " << attempt << " never wrote its leftovers\n"
        << test_support::readFile(dir_.path() / "stderr");
    const auto leftovers = testing::readLeftovers(file);
    all_.insert(all_.end(), leftovers.begin(), leftovers.end());
    return leftovers;
  }

  std::vector<Leftover> all_;
};

TEST_P(DdprunPythonLeftoversTest, NothingOfACrashedAttemptOutlivesItsRestart) {
  Subprocess ddprun = startLeaky({"--max-restarts", "1"}, {"--crash-attempt", "0"});
  const auto first = leftoversOf(0, ddprun);
  ASSERT_EQ(first.size(), 6u);  // subprocess, mp_process, 2 dataloader, setsid, daemon
  const auto second = leftoversOf(1, ddprun);
  EXPECT_TRUE(testing::noneAlive(first))
      << "alive while the next attempt runs: " << testing::describeAlive(first);
  ASSERT_EQ(kill(ddprun.pid(), SIGTERM), 0);
  const Outcome outcome = waitFor(ddprun, 60s);
  EXPECT_EQ(outcome.status.shellCode(), 128 + SIGTERM) << outcome.stderr_text;
  EXPECT_TRUE(testing::noneAlive(second))
      << "alive after ddprun exited: " << testing::describeAlive(second);
}

TEST_P(DdprunPythonLeftoversTest, NothingOutlivesASigtermOfDdprun) {
  Subprocess ddprun = startLeaky({}, {});
  const auto leftovers = leftoversOf(0, ddprun);
  ASSERT_EQ(kill(ddprun.pid(), SIGTERM), 0);
  const Outcome outcome = waitFor(ddprun, 60s);
  EXPECT_EQ(outcome.status.shellCode(), 128 + SIGTERM) << outcome.stderr_text;
  EXPECT_TRUE(testing::noneAlive(leftovers))
      << "alive after ddprun exited: " << testing::describeAlive(leftovers);
}

TEST_P(DdprunPythonLeftoversTest, NothingOutlivesASigkillOfDdprun) {
  Subprocess ddprun = startLeaky({}, {});
  const auto leftovers = leftoversOf(0, ddprun);
  ASSERT_EQ(kill(ddprun.pid(), SIGKILL), 0);
  EXPECT_EQ(ddprun.wait(), (ExitStatus{ExitStatus::Kind::Signaled, SIGKILL}));
  EXPECT_TRUE(test_support::eventually([&] { return testing::noneAlive(leftovers); }, 5s))
      << "alive 5 s after ddprun's SIGKILL: " << testing::describeAlive(leftovers);
}

TEST_P(DdprunPythonLeftoversTest, NothingOutlivesASigkillOfTheAgentProcess) {
  Subprocess ddprun = startLeaky({}, {});
  const auto leftovers = leftoversOf(0, ddprun);
  ASSERT_EQ(kill(test_support::ddprunAgentOf(ddprun.pid()), SIGKILL), 0);
  EXPECT_EQ(waitFor(ddprun, 60s).status, (ExitStatus{ExitStatus::Kind::Signaled, SIGKILL}));
  EXPECT_TRUE(test_support::eventually([&] { return testing::noneAlive(leftovers); }, 5s))
      << "alive 5 s after the agent's SIGKILL: " << testing::describeAlive(leftovers);
}

INSTANTIATE_TEST_SUITE_P(CgroupAllowedOrNot, DdprunPythonLeftoversTest, ::testing::Bool(),
                         [](const auto& param_info) {
                           return param_info.param ? "Cgroup" : "NoCgroup";
                         });

}  // namespace
}  // namespace ddprun::launcher

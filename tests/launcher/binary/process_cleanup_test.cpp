// No process outlives its job, nor its attempt: the ddprun executable with
// fake workers that each leave a process in their group, one in a session of
// its own (setsid) and a daemon (double fork), under a crash and a restart,
// a SIGTERM of ddprun, a SIGKILL of ddprun and a SIGKILL of its agent
// process; each with the cgroup allowed and with DDPRUN_CGROUP=0 (the child
// subreaper and the guardian alone).
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "ddprun/launcher/process/subprocess.hpp"
#include "ddprun/launcher/supervision/worker_cgroup.hpp"
#include "ddprun/test_support/eventually.hpp"
#include "ddprun/test_support/files.hpp"
#include "ddprun/test_support/proc_status.hpp"
#include "ddprun_binary_fixture.hpp"
#include "leftovers.hpp"

namespace ddprun::launcher {
namespace {

using namespace std::chrono_literals;
using testing::DdprunBinaryTest;
using testing::Leftover;
using testing::Outcome;
using testing::readFile;

// GetParam(): whether ddprun may use a cgroup (else DDPRUN_CGROUP=0).
class DdprunLeftoversTest : public DdprunBinaryTest, public ::testing::WithParamInterface<bool> {
 protected:
  void SetUp() override {
    if (!GetParam()) {
      extra_env_.emplace_back("DDPRUN_CGROUP", "0");
    }
  }
  void TearDown() override { testing::killAlive(all_); }

  // Workers run `first`, then --leak, then `then`.
  std::vector<std::string> leakyWorkers(int nproc, std::vector<std::string> then,
                                        std::vector<std::string> first = {}) {
    first.insert(first.end(), {"--leak", dir_.path().string()});
    first.insert(first.end(), then.begin(), then.end());
    return fakeWorkers(nproc, first);
  }

  // Workers and all they start ignore SIGTERM: only SIGKILL ends them.
  std::vector<std::string> stubbornLeakyWorkers(int nproc) {
    return leakyWorkers(nproc, {"--ready-to", dir_.path().string()}, {"--ignore-term"});
  }

  // The leftovers of attempt 0 and the workers themselves.
  std::vector<Leftover> everythingOf(int nproc, Subprocess& ddprun) {
    std::vector<Leftover> processes = leftoversOf(0, nproc, ddprun);
    for (int rank = 0; rank < nproc; ++rank) {
      const auto ready = dir_.path() / (std::to_string(rank) + ".ready");
      EXPECT_TRUE(test_support::eventually([&] { return !readFile(ready).empty(); }, 10s));
      const pid_t pid = std::atoi(readFile(ready).c_str());
      const auto stat = testing::procStat(pid);
      processes.push_back({"worker", pid, stat ? stat->second : ""});
    }
    all_.insert(all_.end(), processes.end() - nproc, processes.end());
    return processes;
  }

  // Every local rank's leftovers of `attempt`, once all have written them.
  std::vector<Leftover> leftoversOf(int attempt, int nproc, Subprocess& ddprun) {
    auto file = [&](int rank) {
      return dir_.path() / ("leak." + std::to_string(attempt) + "." + std::to_string(rank));
    };
    const auto all_written = [&] {
      for (int rank = 0; rank < nproc; ++rank) {
        if (!std::filesystem::exists(file(rank))) {
          return false;
        }
      }
      return true;
    };
    test_support::eventually([&] { return all_written() || ddprun.tryWait().has_value(); }, 20s);
    const bool written = all_written();
    EXPECT_TRUE(written) << "attempt " << attempt << "'s workers never wrote their leftovers";
    std::vector<Leftover> leftovers;
    for (int rank = 0; written && rank < nproc; ++rank) {
      for (const Leftover& leftover : testing::readLeftovers(file(rank))) {
        leftovers.push_back(leftover);
      }
    }
    all_.insert(all_.end(), leftovers.begin(), leftovers.end());
    return leftovers;
  }

  std::vector<Leftover> all_;
};

TEST_P(DdprunLeftoversTest, NothingOfACrashedAttemptOutlivesItsRestart) {
  // Both ranks crash on attempt 0, once both have written their lists.
  auto args = leakyWorkers(
      2, {"--after", (dir_.path() / "leak.0.0").string(), "--after",
          (dir_.path() / "leak.0.1").string(), "--exit-if-attempt", "0", "1", "--hang"});
  args.insert(args.begin(), {"--max-restarts", "1"});
  Subprocess ddprun = start(args);
  const auto first = leftoversOf(0, 2, ddprun);
  ASSERT_EQ(first.size(), 6u);
  const auto second = leftoversOf(1, 2, ddprun);  // the restarted attempt runs
  EXPECT_TRUE(testing::noneAlive(first))
      << "alive while the next attempt runs: " << testing::describeAlive(first);
  ASSERT_EQ(kill(ddprun.pid(), SIGTERM), 0);
  const Outcome outcome = waitFor(ddprun, 30s);
  EXPECT_EQ(outcome.status, (ExitStatus{ExitStatus::Kind::Exited, 128 + SIGTERM}))
      << outcome.stderr_text;
  EXPECT_TRUE(testing::noneAlive(second))
      << "alive after ddprun exited: " << testing::describeAlive(second);
  // Its group child at least (a setsid child not yet scheduled is in it too).
  EXPECT_NE(outcome.stderr_text.find(" left in its process group"), std::string::npos)
      << outcome.stderr_text;
}

TEST_P(DdprunLeftoversTest, NothingOutlivesASigtermOfDdprun) {
  Subprocess ddprun = start(leakyWorkers(2, {"--hang"}));
  const auto leftovers = leftoversOf(0, 2, ddprun);
  ASSERT_EQ(kill(ddprun.pid(), SIGTERM), 0);
  const Outcome outcome = waitFor(ddprun, 30s);
  EXPECT_EQ(outcome.status, (ExitStatus{ExitStatus::Kind::Exited, 128 + SIGTERM}))
      << outcome.stderr_text;
  EXPECT_TRUE(testing::noneAlive(leftovers))
      << "alive after ddprun exited: " << testing::describeAlive(leftovers) << "\n"
      << outcome.stderr_text;
}

// `kill -9 $!`: the pid ddprun was started as. Nothing waits for a grace
// (30 s): workers and leftovers ignore SIGTERM.
TEST_P(DdprunLeftoversTest, NothingOutlivesASigkillOfDdprun) {
  Subprocess ddprun = start(stubbornLeakyWorkers(2));
  const auto leftovers = everythingOf(2, ddprun);
  ASSERT_EQ(kill(ddprun.pid(), SIGKILL), 0);
  EXPECT_EQ(ddprun.wait(), (ExitStatus{ExitStatus::Kind::Signaled, SIGKILL}));
  EXPECT_TRUE(test_support::eventually([&] { return testing::noneAlive(leftovers); }, 5s))
      << "alive 5 s after ddprun's SIGKILL: " << testing::describeAlive(leftovers) << "\n"
      << test_support::readFile(dir_.path() / "stderr");
}

// The OOM killer, or `kill -9` of the agent's own pid: ddprun still cleans
// up, and exits as its agent did.
TEST_P(DdprunLeftoversTest, NothingOutlivesASigkillOfTheAgentProcess) {
  Subprocess ddprun = start(stubbornLeakyWorkers(2));
  const auto leftovers = everythingOf(2, ddprun);
  ASSERT_EQ(kill(test_support::ddprunAgentOf(ddprun.pid()), SIGKILL), 0);
  const Outcome outcome = waitFor(ddprun, 30s);
  EXPECT_EQ(outcome.status, (ExitStatus{ExitStatus::Kind::Signaled, SIGKILL}));
  EXPECT_TRUE(test_support::eventually([&] { return testing::noneAlive(leftovers); }, 5s))
      << "alive 5 s after the agent's SIGKILL: " << testing::describeAlive(leftovers) << "\n"
      << outcome.stderr_text;
}

TEST_P(DdprunLeftoversTest, TheLogSaysWhichMechanismsRun) {
  const Outcome outcome = run(fakeWorkers(1, {}));
  ASSERT_TRUE(outcome.status.success()) << outcome.stderr_text;
  EXPECT_NE(outcome.stderr_text.find("process clean-up: child subreaper, guardian pid "),
            std::string::npos)
      << outcome.stderr_text;
  if (!GetParam()) {
    EXPECT_NE(outcome.stderr_text.find("no cgroup (DDPRUN_CGROUP=0)"), std::string::npos)
        << outcome.stderr_text;
  }
}

INSTANTIATE_TEST_SUITE_P(CgroupAllowedOrNot, DdprunLeftoversTest, ::testing::Bool(),
                         [](const auto& param_info) {
                           return param_info.param ? "Cgroup" : "NoCgroup";
                         });

// `pkill ddprun`, Slurm, systemd and `timeout` signal both ddprun processes,
// and the guardian forwards its copy: still one request, so the workers get
// their grace instead of an immediate SIGKILL.
TEST_F(DdprunBinaryTest, ASignalToBothDdprunProcessesIsOneRequest) {
  auto args = fakeWorkers(2, {"--ignore-term", "--ready-to", dir_.path().string()});
  args.insert(args.begin(), {"--shutdown-timeout", "2"});
  Subprocess ddprun = start(args);
  ASSERT_TRUE(test_support::eventually(
      [&] {
        return !readFile(dir_.path() / "0.ready").empty() &&
               !readFile(dir_.path() / "1.ready").empty();
      },
      10s));
  const pid_t agent = test_support::ddprunAgentOf(ddprun.pid());
  ASSERT_NE(agent, ddprun.pid());
  const auto signalled = std::chrono::steady_clock::now();
  ASSERT_EQ(kill(ddprun.pid(), SIGTERM), 0);
  ASSERT_EQ(kill(agent, SIGTERM), 0);
  const Outcome outcome = waitFor(ddprun, 30s);
  EXPECT_EQ(outcome.status, (ExitStatus{ExitStatus::Kind::Exited, 128 + SIGTERM}));
  EXPECT_GE(std::chrono::steady_clock::now() - signalled, 2s)
      << "the workers were SIGKILLed before --shutdown-timeout\n"
      << outcome.stderr_text;
}

// A signal the agent does not handle ends ddprun as it did before there was a
// guardian: killed by that signal, its workers with it.
TEST_F(DdprunBinaryTest, AnUnhandledSignalKillsDdprunAndItsWorkers) {
  Subprocess ddprun = start(fakeWorkers(1, {"--ready-to", dir_.path().string(), "--hang"}));
  ASSERT_TRUE(
      test_support::eventually([&] { return !readFile(dir_.path() / "0.ready").empty(); }, 10s));
  const pid_t worker = std::atoi(readFile(dir_.path() / "0.ready").c_str());
  const testing::Leftover the_worker{"worker", worker, testing::procStat(worker)->second};
  ASSERT_EQ(kill(ddprun.pid(), SIGALRM), 0);  // not SIGUSR1 or SIGUSR2: those are forwarded
  EXPECT_EQ(waitFor(ddprun, 30s).status, (ExitStatus{ExitStatus::Kind::Signaled, SIGALRM}));
  EXPECT_TRUE(test_support::eventually([&] { return !testing::alive(the_worker); }, 5s));
}

// Where the agent's cgroup v2 is delegated and writable, the workers (and so
// all they start) run in a cgroup of the attempt's own, removed at its end.
TEST_F(DdprunBinaryTest, WorkersRunInACgroupOfTheirAttemptWhereOneIsDelegated) {
  const CgroupSupport support = detectCgroupSupport();
  if (!support.parent) {
    GTEST_SKIP() << "no delegated, writable cgroup v2 here, so ddprun makes none: "
                 << support.why_not;
  }
  auto args = fakeWorkers(1, {"--leak", dir_.path().string(), "--exit-if-attempt", "0", "1"});
  args.insert(args.begin(), {"--max-restarts", "1"});
  const Outcome outcome = run(args);
  for (const char* attempt : {"leak.0.0", "leak.1.0"}) {
    testing::killAlive(testing::readLeftovers(dir_.path() / attempt));
  }
  ASSERT_TRUE(outcome.status.success()) << outcome.stderr_text;
  // <the agent's cgroup>/ddprun-<pid>-<start time>-<n>, a fresh one per attempt
  const std::filesystem::path first = testing::cgroupOf(dir_.path() / "leak.0.0");
  const std::filesystem::path second = testing::cgroupOf(dir_.path() / "leak.1.0");
  EXPECT_EQ(first.filename().string().rfind("ddprun-", 0), 0u) << first;
  EXPECT_EQ(first.string().substr(first.string().size() - 2), "-0") << first;
  EXPECT_EQ(second.string().substr(second.string().size() - 2), "-1") << second;
  EXPECT_NE(outcome.stderr_text.find("processes the workers left behind (cgroup.kill)"),
            std::string::npos)
      << outcome.stderr_text;
  for (const auto& cgroup : {first, second}) {
    EXPECT_FALSE(std::filesystem::exists(*support.parent / cgroup.filename()))
        << cgroup << " was not removed";
  }
}

}  // namespace
}  // namespace ddprun::launcher

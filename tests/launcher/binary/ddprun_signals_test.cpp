// Stopping the ddprun executable with a signal (docs/torchrun-contract.md
// §7.4, §8): Ctrl-C as a terminal sends it, to ddprun's whole process group
// (the guardian and the agent), is one request, ends in one line and exit
// 130, never a failure table; a second Ctrl-C kills the workers at once.
#include <gtest/gtest.h>
#include <signal.h>

#include <cerrno>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "ddprun/launcher/process/subprocess.hpp"
#include "ddprun/test_support/eventually.hpp"
#include "ddprun/test_support/files.hpp"
#include "ddprun_binary_fixture.hpp"

namespace ddprun::launcher {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using test_support::readFile;
using testing::countOf;
using testing::DdprunBinaryTest;
using testing::Outcome;

constexpr const char* kInterrupted = "ddprun: interrupted by SIGINT; workers stopped\n";

class DdprunSignalsTest : public DdprunBinaryTest {
 protected:
  // A worker script: `on_signal` is its shell trap for SIGINT and SIGTERM
  // (empty: the default action), then it says it runs and waits.
  std::string shellWorker(const std::string& name, const std::string& trap) {
    const fs::path script = dir_.path() / name;
    std::ofstream(script) << "#!/bin/sh\n"
                          << trap << "\necho $$ > '" << dir_.path().string()
                          << "'/$LOCAL_RANK.ready\nwhile :; do sleep 1; done\n";
    fs::permissions(script, fs::perms::owner_all);
    return script.string();
  }

  // The workers' pids, once every one of `nproc` has started.
  std::vector<pid_t> readyWorkers(int nproc) {
    std::vector<pid_t> pids;
    const bool ready = test_support::eventually(
        [&] {
          pids.clear();
          for (int rank = 0; rank < nproc; ++rank) {
            const std::string pid = readFile(dir_.path() / (std::to_string(rank) + ".ready"));
            if (pid.empty()) {
              return false;
            }
            pids.push_back(std::stoi(pid));
          }
          return true;
        },
        20s);
    EXPECT_TRUE(ready) << "the workers never started";
    return pids;
  }

  void removeReadyFiles(int nproc) {
    for (int rank = 0; rank < nproc; ++rank) {
      fs::remove(dir_.path() / (std::to_string(rank) + ".ready"));
    }
  }
};

// Ctrl-C reaches ddprun's guardian and its agent alike; the guardian's copy
// is the same request. Whatever the workers make of SIGINT (die of it, as
// the fake worker does, or exit 1, as Python does when KeyboardInterrupt
// surfaces in its training loop), the user stopped the job: one line, no
// failure table, exit 130.
TEST_F(DdprunSignalsTest, CtrlCIsOneLineAndExit130NotAFailure) {
  const std::vector<std::vector<std::string>> workers = {
      {"--no-python", DDPRUN_FAKE_WORKER, "--ready-to", dir_.path().string(), "--hang"},
      {shellWorker("exit-one.sh", "trap 'exit 1' INT TERM")}};
  for (const auto& worker : workers) {
    removeReadyFiles(2);
    std::vector<std::string> args = {"--standalone", "--nproc-per-node", "2"};
    args.insert(args.end(), worker.begin(), worker.end());
    Subprocess ddprun = start(args);
    readyWorkers(2);
    ASSERT_TRUE(ddprun.signalGroup(SIGINT));  // as a terminal's Ctrl-C: the whole group
    const Outcome outcome = waitFor(ddprun, 20s);
    EXPECT_EQ(outcome.status, (ExitStatus{ExitStatus::Kind::Exited, 130})) << outcome.stderr_text;
    EXPECT_EQ(countOf(outcome.stderr_text, kInterrupted), 1) << outcome.stderr_text;
    EXPECT_EQ(countOf(outcome.stderr_text, "FAILED"), 0) << outcome.stderr_text;
    EXPECT_EQ(countOf(outcome.stderr_text, "Root Cause"), 0) << outcome.stderr_text;
    EXPECT_EQ(countOf(outcome.stderr_text, "again"), 0) << "one Ctrl-C counted twice";
  }
}

// Workers that ignore SIGINT and SIGTERM: the first Ctrl-C asks them to
// stop and they do not; the second kills them at once, long before
// --shutdown-timeout.
TEST_F(DdprunSignalsTest, ASecondCtrlCKillsTheWorkersAtOnce) {
  const std::string worker = shellWorker("stubborn.sh", "trap '' INT TERM");
  Subprocess ddprun =
      start({"--standalone", "--nproc-per-node", "2", "--shutdown-timeout", "60", worker});
  const std::vector<pid_t> pids = readyWorkers(2);
  ASSERT_EQ(pids.size(), 2u);
  ASSERT_TRUE(ddprun.signalGroup(SIGINT));
  const auto first = std::chrono::steady_clock::now();
  ASSERT_TRUE(test_support::eventually(
      [&] { return readFile(dir_.path() / "stderr").find("received SIGINT") != std::string::npos; },
      10s));
  // Not a wait for an event: the same signal within 200 ms of the first is
  // the same request (the guardian's copy), so a second one must come later.
  std::this_thread::sleep_until(first + 300ms);
  for (pid_t pid : pids) {
    EXPECT_EQ(kill(pid, 0), 0) << "a worker that ignores SIGINT stopped: " << pid;
  }
  const auto second = std::chrono::steady_clock::now();
  ASSERT_TRUE(ddprun.signalGroup(SIGINT));
  const Outcome outcome = waitFor(ddprun, 20s);
  EXPECT_LT(std::chrono::steady_clock::now() - second, 10s);
  EXPECT_EQ(outcome.status, (ExitStatus{ExitStatus::Kind::Exited, 130})) << outcome.stderr_text;
  EXPECT_EQ(countOf(outcome.stderr_text, "received SIGINT again: killing the workers now"), 1)
      << outcome.stderr_text;
  EXPECT_EQ(countOf(outcome.stderr_text, kInterrupted), 1) << outcome.stderr_text;
  EXPECT_EQ(countOf(outcome.stderr_text, "FAILED"), 0) << outcome.stderr_text;
  for (pid_t pid : pids) {
    EXPECT_EQ(kill(pid, 0), -1) << "worker " << pid << " outlived ddprun";
    EXPECT_EQ(errno, ESRCH);
  }
}

// Other handled signals a user or a scheduler sends end the same way: one
// line naming the signal, exit 128 + signal, no failure table.
TEST_F(DdprunSignalsTest, SigtermAndSighupAreOneLineToo) {
  const std::string worker = shellWorker("exit-one.sh", "trap 'exit 1' INT TERM HUP");
  for (const int signal : {SIGTERM, SIGHUP}) {
    removeReadyFiles(2);
    Subprocess ddprun = start({"--standalone", "--nproc-per-node", "2", worker});
    readyWorkers(2);
    ASSERT_EQ(kill(ddprun.pid(), signal), 0);  // as `kill`, Slurm or systemd: ddprun's pid
    const Outcome outcome = waitFor(ddprun, 20s);
    EXPECT_EQ(outcome.status, (ExitStatus{ExitStatus::Kind::Exited, 128 + signal}))
        << outcome.stderr_text;
    EXPECT_EQ(countOf(outcome.stderr_text,
                      "ddprun: interrupted by " + signalName(signal) + "; workers stopped\n"),
              1)
        << outcome.stderr_text;
    EXPECT_EQ(countOf(outcome.stderr_text, "FAILED"), 0) << outcome.stderr_text;
  }
}

}  // namespace
}  // namespace ddprun::launcher

// Warning signals (docs/torchrun-contract.md §7.4): SIGUSR1 and SIGUSR2, as
// a scheduler sends them before a time limit (Slurm's --signal=USR1@60, to
// every process of the step), are passed on to the workers, which keep
// running; ddprun neither stops nor dies of one, whether its workers run,
// or it waits at the exit barrier for other nodes. Named in
// --signals-to-handle, SIGUSR1 stops the run as torchrun's handled signals do.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
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

class DdprunWarningSignalsTest : public DdprunBinaryTest {
 protected:
  // A worker that writes a line to <dir>/<local rank>.<signal> for each
  // SIGUSR1 or SIGUSR2 it gets, says it runs, and exits 0 once <dir>/finish
  // exists.
  std::string countingWorker() {
    const fs::path script = dir_.path() / "counting.sh";
    const std::string dir = dir_.path().string();
    std::ofstream(script) << "#!/bin/sh\n"
                          << "trap 'echo . >> \"" << dir << "/$LOCAL_RANK.usr1\"' USR1\n"
                          << "trap 'echo . >> \"" << dir << "/$LOCAL_RANK.usr2\"' USR2\n"
                          << "echo $$ > \"" << dir << "/$LOCAL_RANK.ready\"\n"
                          << "while [ ! -e \"" << dir << "/finish\" ]; do sleep 0.05; done\n";
    fs::permissions(script, fs::perms::owner_all);
    return script.string();
  }

  int linesIn(const std::string& name) const {
    return countOf(readFile(dir_.path() / name), ".\n");
  }

  bool everyWorkerReady(int nproc) const {
    for (int rank = 0; rank < nproc; ++rank) {
      if (readFile(dir_.path() / (std::to_string(rank) + ".ready")).empty()) {
        return false;
      }
    }
    return true;
  }

  void finishWorkers() { std::ofstream(dir_.path() / "finish") << "now\n"; }
};

// Slurm signals every process of the step: ddprun's guardian and its agent
// (a signal to ddprun's process group here) and the workers themselves.
// Each worker gets ddprun's copy once (the guardian's copy is the same
// request), keeps running, and the job ends with success.
TEST_F(DdprunWarningSignalsTest, Usr1AndUsr2ReachTheWorkersOnceAndTheyKeepRunning) {
  Subprocess ddprun = start({"--standalone", "--nproc-per-node", "2", countingWorker()});
  ASSERT_TRUE(test_support::eventually([&] { return everyWorkerReady(2); }, 20s))
      << readFile(dir_.path() / "stderr");
  for (const int signal : {SIGUSR1, SIGUSR2}) {
    const std::string file = signal == SIGUSR1 ? "usr1" : "usr2";
    ASSERT_TRUE(ddprun.signalGroup(signal));
    EXPECT_TRUE(test_support::eventually(
        [&] { return linesIn("0." + file) == 1 && linesIn("1." + file) == 1; }, 10s))
        << file << ": " << readFile(dir_.path() / "stderr");
  }
  EXPECT_FALSE(ddprun.tryWait().has_value()) << "a warning signal ended ddprun";
  finishWorkers();
  const Outcome outcome = waitFor(ddprun, 20s);
  EXPECT_TRUE(outcome.status.success()) << outcome.status.describe() << outcome.stderr_text;
  for (const std::string name : {"0.usr1", "1.usr1", "0.usr2", "1.usr2"}) {
    EXPECT_EQ(linesIn(name), 1) << name << ": one signal, forwarded twice";
  }
  EXPECT_EQ(countOf(outcome.stderr_text,
                    "received SIGUSR1: forwarded to local rank(s) [0,1], which handle it and "
                    "keep running\n"),
            1)
      << outcome.stderr_text;
  EXPECT_EQ(countOf(outcome.stderr_text, "received SIGUSR2: forwarded to local rank(s) [0,1]"), 1)
      << outcome.stderr_text;
  EXPECT_EQ(countOf(outcome.stderr_text, "interrupted"), 0) << outcome.stderr_text;
}

// A worker without a handler for SIGUSR1 (a Python script that installs
// none) would die of it: it is not told, keeps running, and the job ends
// with success, as a user's `kill -USR1` of ddprun should leave it. The log
// names who was told and who was not.
TEST_F(DdprunWarningSignalsTest, AWorkerWithoutAHandlerIsNotToldAndKeepsRunning) {
  const fs::path script = dir_.path() / "rank0_traps.sh";
  const std::string dir = dir_.path().string();
  std::ofstream(script) << "#!/bin/sh\n"
                        << "if [ \"$LOCAL_RANK\" = 0 ]; then\n"
                        << "  trap 'echo . >> \"" << dir << "/0.usr1\"' USR1\n"
                        << "fi\n"
                        << "echo $$ > \"" << dir << "/$LOCAL_RANK.ready\"\n"
                        << "while [ ! -e \"" << dir << "/finish\" ]; do sleep 0.05; done\n";
  fs::permissions(script, fs::perms::owner_all);
  Subprocess ddprun = start({"--standalone", "--nproc-per-node", "2", script.string()});
  ASSERT_TRUE(test_support::eventually([&] { return everyWorkerReady(2); }, 20s))
      << readFile(dir_.path() / "stderr");
  ASSERT_EQ(::kill(ddprun.pid(), SIGUSR1), 0);
  EXPECT_TRUE(test_support::eventually([&] { return linesIn("0.usr1") == 1; }, 10s))
      << readFile(dir_.path() / "stderr");
  finishWorkers();
  const Outcome outcome = waitFor(ddprun, 20s);
  EXPECT_TRUE(outcome.status.success()) << outcome.status.describe() << outcome.stderr_text;
  EXPECT_EQ(countOf(outcome.stderr_text,
                    "received SIGUSR1: forwarded to local rank(s) [0], which handle it and keep "
                    "running; not to [1], which do not handle it (it would end them)\n"),
            1)
      << outcome.stderr_text;
}

// Node 0's workers are done; it waits at the exit barrier for node 1's.
// A warning then (Slurm's comes at a fixed time, whatever each node is
// doing) leaves it waiting, and both nodes end with success.
TEST_F(DdprunWarningSignalsTest, AWarningAtTheExitBarrierDoesNotEndDdprun) {
  const std::string endpoint = "127.0.0.1:" + std::to_string(test_support::freeLoopbackPort());
  auto node = [&](int rank, std::vector<std::string> worker_args) {
    std::vector<std::string> args = {
        "--nnodes", "2",           "--node-rank", std::to_string(rank), "--rdzv-endpoint",
        endpoint,   "--rdzv-conf", "timeout=30",  "--no-python",        DDPRUN_FAKE_WORKER};
    args.insert(args.end(), worker_args.begin(), worker_args.end());
    SpawnOptions options;
    options.argv = {DDPRUN_BINARY};
    options.argv.insert(options.argv.end(), args.begin(), args.end());
    options.env = childEnvironment();
    const int log = ::open((dir_.path() / ("node" + std::to_string(rank))).c_str(),
                           O_WRONLY | O_CREAT | O_TRUNC, 0600);
    options.stdout_fd = log;
    options.stderr_fd = log;
    Subprocess child(options);
    ::close(log);
    return child;
  };
  Subprocess node1 = node(1, {"--after", (dir_.path() / "finish").string()});
  Subprocess node0 = node(0, {});
  const auto node0_log = [&] { return readFile(dir_.path() / "node0"); };
  ASSERT_TRUE(test_support::eventually(
      [&] { return node0_log().find("the exit barrier") != std::string::npos; }, 20s))
      << node0_log();
  ASSERT_TRUE(node0.signalGroup(SIGUSR1));
  ASSERT_TRUE(node0.signalGroup(SIGUSR2));
  finishWorkers();
  const auto status0 = node0.waitFor(30s);
  const auto status1 = node1.waitFor(30s);
  ASSERT_TRUE(status0.has_value()) << node0_log();
  EXPECT_TRUE(status0->success()) << status0->describe() << "\n" << node0_log();
  ASSERT_TRUE(status1.has_value());
  EXPECT_TRUE(status1->success()) << status1->describe() << "\n" << readFile(dir_.path() / "node1");
}

// A warning that comes while ddprun still starts (here: while it asks a
// python3 whether it has torch, which may take seconds) neither ends it:
// until the fix, SIGUSR1 killed ddprun before its guardian and agent ran.
TEST_F(DdprunWarningSignalsTest, AWarningWhileDdprunStartsDoesNotEndIt) {
  const fs::path bin = dir_.path() / "bin";
  fs::create_directories(bin);
  const std::string dir = dir_.path().string();
  std::ofstream(bin / "python3") << "#!/bin/sh\n"
                                 << "echo probing > \"" << dir << "/probing\"\n"
                                 << "i=0\n"
                                 << "while [ ! -e \"" << dir
                                 << "/finish\" ] && [ $i -lt 200 ]; do\n"
                                 << "  sleep 0.05; i=$((i + 1))\n"
                                 << "done\n"
                                 << "exit 1\n";
  fs::permissions(bin / "python3", fs::perms::owner_all);
  extra_env_ = {{"PATH", bin.string() + ":/usr/bin:/bin"}};
  Subprocess ddprun = start({"--dry-run", "--standalone", "train.py"});
  ASSERT_TRUE(test_support::eventually([&] { return fs::exists(dir_.path() / "probing"); }, 20s))
      << readFile(dir_.path() / "stderr");
  ASSERT_EQ(::kill(ddprun.pid(), SIGUSR1), 0);
  ASSERT_EQ(::kill(ddprun.pid(), SIGUSR2), 0);
  finishWorkers();
  const Outcome outcome = waitFor(ddprun, 30s);
  EXPECT_EQ(outcome.status.kind, ExitStatus::Kind::Exited)
      << outcome.status.describe() << outcome.stderr_text;
}

// --signals-to-handle SIGUSR1 makes it a stop request again, as in torchrun:
// forwarded, the workers stopped, exit 128 + SIGUSR1.
TEST_F(DdprunWarningSignalsTest, AHandledSigusr1StopsTheRunAsTorchrunDoes) {
  // The counting worker survives SIGUSR1: it is SIGKILLed after the grace.
  Subprocess ddprun = start({"--standalone", "--nproc-per-node", "2", "--signals-to-handle",
                             "SIGTERM,SIGUSR1", "--shutdown-timeout", "1", countingWorker()});
  ASSERT_TRUE(test_support::eventually([&] { return everyWorkerReady(2); }, 20s))
      << readFile(dir_.path() / "stderr");
  ASSERT_EQ(::kill(ddprun.pid(), SIGUSR1), 0);
  const Outcome outcome = waitFor(ddprun, 20s);
  EXPECT_EQ(outcome.status, (ExitStatus{ExitStatus::Kind::Exited, 128 + SIGUSR1}))
      << outcome.stderr_text;
  EXPECT_EQ(countOf(outcome.stderr_text, "ddprun: interrupted by SIGUSR1; workers stopped\n"), 1)
      << outcome.stderr_text;
}

}  // namespace
}  // namespace ddprun::launcher

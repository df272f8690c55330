// `ddprun --hostfile` as a user runs it, on this machine: "localhost" runs its
// agent as a child, and the other hosts are reached through a stand-in for
// ssh (fake_ssh.sh: the command runs here, in a session of its own, as sshd
// would run it there). The plan --dry-run prints, a bad hostfile line, a job
// to its end with every line prefixed by its host, a worker's failure as the
// launch's status, and Ctrl-C or kill -9 of the launching process leaving
// nothing behind on any "host".
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

#include "ddprun/test_support/eventually.hpp"
#include "ddprun/test_support/proc_status.hpp"
#include "ddprun_binary_fixture.hpp"

namespace ddprun::launcher {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using test_support::processesWith;
using test_support::readFile;
using testing::contains;
using testing::DdprunBinaryTest;
using testing::Outcome;

class DdprunHostfileTest : public DdprunBinaryTest {
 protected:
  void SetUp() override {
    // The "remote" agents run the ddprun their PATH finds, as on a real host.
    extra_env_ = {{"PATH", fs::path(DDPRUN_BINARY).parent_path().string() + ":/usr/bin:/bin"}};
    std::ofstream(hostfile()) << "# the test's two hosts\nlocalhost slots=2\nnode2 slots=2\n";
  }

  std::string hostfile() const { return (dir_.path() / "hosts").string(); }

  std::vector<std::string> launch(std::vector<std::string> worker_args) {
    std::vector<std::string> args = {"--hostfile",    hostfile(),           "--ssh-command",
                                     DDPRUN_FAKE_SSH, "--shutdown-timeout", "5",
                                     "--no-python",   DDPRUN_FAKE_WORKER};
    args.insert(args.end(), worker_args.begin(), worker_args.end());
    return args;
  }
};

TEST_F(DdprunHostfileTest, DryRunPrintsEachHostsSlotsAndCommand) {
  std::ofstream(hostfile()) << "localhost slots=2\nnode2 slots=4\n";
  const Outcome outcome = run({"--dry-run", "--hostfile", hostfile(), "--exclude", "node2:1",
                               "--max-restarts", "2", "--no-python", DDPRUN_FAKE_WORKER});
  ASSERT_TRUE(outcome.status.success()) << outcome.stderr_text;
  const auto plan = nlohmann::json::parse(outcome.stdout_text);
  EXPECT_EQ(plan["nnodes"], "2");
  EXPECT_EQ(plan["rendezvous_hosted_here"], true);
  ASSERT_EQ(plan["hosts"].size(), 2u);
  EXPECT_EQ(plan["hosts"][0]["host"], "localhost");
  EXPECT_EQ(plan["hosts"][0]["over_ssh"], false);
  EXPECT_EQ(plan["hosts"][1]["slots"], nlohmann::json({0, 2, 3}));
  const std::string remote = plan["hosts"][1]["command"];
  EXPECT_TRUE(
      remote.starts_with("ssh -o BatchMode=yes -o ServerAliveInterval=5 -o "
                         "ServerAliveCountMax=3 node2 "))
      << remote;
  for (const char* part : {"CUDA_VISIBLE_DEVICES=0,2,3", "--nproc-per-node=3", "--nnodes=2",
                           "--rdzv-backend=c10d", "--stdin-hangup", "--max-restarts 2"}) {
    EXPECT_TRUE(contains(remote, part)) << part << " in " << remote;
  }
}

TEST_F(DdprunHostfileTest, ABadHostfileLineIsOneLineAndExitTwo) {
  std::ofstream(hostfile()) << "localhost slots=2\nnode2 slots=many\n";
  const Outcome outcome = run(launch({}));
  EXPECT_EQ(outcome.status.shellCode(), 2);
  EXPECT_EQ(outcome.stderr_text, "ddprun: hostfile " + hostfile() +
                                     " line 2 'node2 slots=many': expected 'HOST slots=N' with "
                                     "1 <= N <= 4096\n");
}

// What the launch sets itself is refused, from a flag or its PET_ variable.
TEST_F(DdprunHostfileTest, WhatTheLaunchSetsItselfIsRefusedInOneLine) {
  const std::string why =
      " cannot be used with --hostfile: the hostfile says how many workers each host runs, and "
      "the launch sets the rendezvous\n";
  std::vector<std::string> args = launch({});
  args.insert(args.begin(), {"--node-rank", "1"});
  Outcome outcome = run(args);
  EXPECT_EQ(outcome.status.shellCode(), 2);
  EXPECT_EQ(outcome.stderr_text, "ddprun: --node-rank" + why);
  extra_env_.emplace_back("PET_NPROC_PER_NODE", "4");
  outcome = run(launch({}));
  EXPECT_EQ(outcome.status.shellCode(), 2);
  EXPECT_EQ(outcome.stderr_text, "ddprun: PET_NPROC_PER_NODE (--nproc-per-node)" + why);
}

// The launch's own rendezvous is c10d: a MASTER_ADDR in the environment
// (read by the static rules only) and an endpoint without a port (c10d's
// default) are no contradiction.
TEST_F(DdprunHostfileTest, NoStaticRuleAppliesToTheLaunch) {
  extra_env_.emplace_back("MASTER_ADDR", "somewhere");
  Outcome outcome = run({"--dry-run", "--nnodes", "1:2", "--hostfile", hostfile(), "--no-python",
                         DDPRUN_FAKE_WORKER});
  EXPECT_TRUE(outcome.status.success()) << outcome.stderr_text;
  outcome = run({"--dry-run", "--rdzv-endpoint", "ddprund-host", "--hostfile", hostfile(),
                 "--no-python", DDPRUN_FAKE_WORKER});
  ASSERT_TRUE(outcome.status.success()) << outcome.stderr_text;
  EXPECT_EQ(nlohmann::json::parse(outcome.stdout_text)["rdzv_endpoint"], "ddprund-host");
}

// A job whose status is 255 is no lost host: ssh's own 255 means its session
// failed, so a remote agent says 254 instead; a local one says 255.
TEST_F(DdprunHostfileTest, AJobEndingWith255IsNotALostHost) {
  const Outcome outcome = runFor(launch({"--exit", "255"}), 60s);
  EXPECT_TRUE(outcome.status.shellCode() == 254 || outcome.status.shellCode() == 255)
      << outcome.status.describe() << outcome.stderr_text;
  EXPECT_FALSE(contains(outcome.stderr_text, "the host is lost")) << outcome.stderr_text;
}

// Each host's two workers, whichever ranks the c10d round gave them.
TEST_F(DdprunHostfileTest, TwoHostsRunTheJobToItsEndEachLineWithItsHost) {
  const Outcome outcome = runFor(launch({"--chatter", "1"}), 60s);
  ASSERT_TRUE(outcome.status.success()) << outcome.status.describe() << outcome.stderr_text;
  const bool localhost_first = contains(outcome.stdout_text, "localhost: rank 0 line 0 end\n");
  const std::string first = localhost_first ? "localhost" : "node2";
  const std::string second = localhost_first ? "node2" : "localhost";
  for (const std::string& line :
       {first + ": rank 0 line 0 end\n", first + ": rank 1 line 0 end\n",
        second + ": rank 2 line 0 end\n", second + ": rank 3 line 0 end\n"}) {
    EXPECT_TRUE(contains(outcome.stdout_text, line)) << line << " in:\n" << outcome.stdout_text;
  }
}

// --include picks hosts and GPUs: each host runs a worker per slot it was
// given, and a narrowed host's workers see only its slots.
TEST_F(DdprunHostfileTest, IncludeGivesEachHostItsGpusAndAWorkerPerGpu) {
  std::ofstream(hostfile()) << "localhost slots=4\nnode2 slots=4\nnode3 slots=4\n";
  const Outcome outcome = runFor({"--hostfile", hostfile(), "--include", "localhost:1,3@node2:2",
                                  "--ssh-command", DDPRUN_FAKE_SSH, "--no-python", "/usr/bin/env"},
                                 60s);
  ASSERT_TRUE(outcome.status.success()) << outcome.status.describe() << outcome.stderr_text;
  EXPECT_EQ(testing::countOf(outcome.stdout_text, "localhost: CUDA_VISIBLE_DEVICES=1,3\n"), 2)
      << outcome.stdout_text;
  EXPECT_EQ(testing::countOf(outcome.stdout_text, "node2: CUDA_VISIBLE_DEVICES=2\n"), 1)
      << outcome.stdout_text;
  EXPECT_EQ(testing::countOf(outcome.stdout_text, ": WORLD_SIZE=3\n"), 3) << outcome.stdout_text;
  EXPECT_FALSE(contains(outcome.stdout_text, "node3: ")) << outcome.stdout_text;
}

// Which host runs rank 3 is the c10d round's choice (the order the agents
// joined): the line names whichever it was, and that host's agent said so.
TEST_F(DdprunHostfileTest, AWorkersFailureIsTheLaunchsStatusNamingItsHost) {
  const Outcome outcome = runFor(launch({"--only-rank", "3", "--exit", "7"}), 60s);
  EXPECT_EQ(outcome.status.shellCode(), 7) << outcome.stderr_text;
  std::smatch named;
  const std::regex last("ddprun: host (localhost|node2): its agent exited with code 7\n$");
  ASSERT_TRUE(std::regex_search(outcome.stderr_text, named, last)) << outcome.stderr_text;
  EXPECT_TRUE(contains(outcome.stderr_text, named[1].str() + ":   rank      : 3 (local_rank: 1)"))
      << outcome.stderr_text;
}

// Ctrl-C stops every host's agent, which stop their workers; kill -9 of
// the launching process ends its children, and each "remote" agent sees its
// session's input end and stops: nothing is left anywhere, agents included.
TEST_F(DdprunHostfileTest, CtrlCOrKillNineOfTheLaunchLeavesNothing) {
  const fs::path ready = dir_.path() / "ready";
  fs::create_directories(ready);
  for (const int signal : {SIGINT, SIGKILL}) {
    SCOPED_TRACE(signal);
    fs::remove_all(ready);
    fs::create_directories(ready);
    const std::string marker = (dir_.path() / ("never-" + std::to_string(signal))).string();
    Subprocess launch_process = start(launch({"--ready-to", ready.string(), "--after", marker}));
    ASSERT_TRUE(test_support::eventually(
        [&] { return std::distance(fs::directory_iterator(ready), fs::directory_iterator()) == 2; },
        30s))
        << readFile(dir_.path() / "stderr");
    ASSERT_TRUE(
        test_support::eventually([&] { return processesWith(marker, "fake_worker") == 4; }, 30s))
        << "expected 4 workers, saw " << processesWith(marker, "fake_worker");
    ::kill(launch_process.pid(), signal);
    const ExitStatus status = launch_process.wait();
    if (signal == SIGINT) {
      EXPECT_EQ(status.shellCode(), 130) << readFile(dir_.path() / "stderr");
    }
    EXPECT_TRUE(test_support::eventually([&] { return processesWith(marker) == 0; }, 20s))
        << processesWith(marker) << " process(es) left after signal " << signal << "\n"
        << readFile(dir_.path() / "stderr");
  }
}

}  // namespace
}  // namespace ddprun::launcher

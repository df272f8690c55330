// Elastic c10d jobs of several real ddprun agents on loopback, with fake
// workers: nodes agree on ranks through ddprund (external, or embedded in the
// agent at the endpoint), and when one agent is SIGKILLed the survivor's
// workers restart at once in a smaller world.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "ddprun/launcher/process/subprocess.hpp"
#include "ddprun/test_support/daemon_process.hpp"
#include "ddprun/test_support/eventually.hpp"
#include "ddprun/test_support/files.hpp"
#include "ddprun/test_support/temp_dir.hpp"
#include "elastic_fixture.hpp"

namespace ddprun::launcher {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

using test_support::readFile;

using testing::alive;
using testing::ElasticTest;

TEST_F(ElasticTest, TwoNodesAgreeOnRanksThroughAnExternalDaemon) {
  test_support::DaemonProcess daemon;
  Subprocess a = agent("a", "2", daemon.port());
  Subprocess b = agent("b", "2", daemon.port());
  EXPECT_TRUE(a.wait().success()) << log("a");
  EXPECT_TRUE(b.wait().success()) << log("b");
  std::set<std::string> ranks;
  std::set<std::string> stores;
  for (const std::string node : {"a", "b"}) {
    for (int local_rank : {0, 1}) {
      auto worker = env(node, local_rank);
      EXPECT_EQ(worker["WORLD_SIZE"], "4");
      EXPECT_EQ(worker["TORCHELASTIC_RESTART_COUNT"], "0");
      EXPECT_EQ(worker["GROUP_WORLD_SIZE"], "2");
      ranks.insert(worker["RANK"]);
      stores.insert(worker["MASTER_ADDR"] + ":" + worker["MASTER_PORT"]);
    }
  }
  EXPECT_EQ(ranks, (std::set<std::string>{"0", "1", "2", "3"}));
  EXPECT_EQ(stores.size(), 1u) << "every worker must use one store";
  EXPECT_EQ(env("a", 1)["RANK"], std::to_string(std::stoi(env("a", 0)["RANK"]) + 1))
      << "a node's ranks are one contiguous block";
}

TEST_F(ElasticTest, TheAgentAtTheEndpointHostsTheRendezvous) {
  const std::uint16_t port = test_support::freeLoopbackPort();
  Subprocess a = agent("a", "2", port);
  Subprocess b = agent("b", "2", port);
  EXPECT_TRUE(a.wait().success()) << log("a");
  EXPECT_TRUE(b.wait().success()) << log("b");
  EXPECT_NE((log("a") + log("b")).find("hosting the rendezvous at 127.0.0.1:"), std::string::npos)
      << log("a") << log("b");
  EXPECT_EQ(env("a", 0)["WORLD_SIZE"], "4");
  EXPECT_EQ(env("b", 0)["WORLD_SIZE"], "4");
}

// A variable the user set reaches the workers under c10d as under
// --standalone: TORCH_NCCL_ASYNC_ERROR_HANDLING=0 is not reset to 1.
TEST_F(ElasticTest, TheUsersNcclAsyncErrorHandlingReachesTheWorkers) {
  const std::string endpoint = "127.0.0.1:" + std::to_string(test_support::freeLoopbackPort());
  std::vector<Subprocess> agents;
  for (const std::string name : {"a", "b"}) {
    agents.push_back(
        launch(name,
               {"--nnodes", "2", "--rdzv-backend", "c10d", "--rdzv-endpoint", endpoint,
                "--no-python", DDPRUN_FAKE_WORKER, "--env-to", (dir_.path() / name).string()},
               {{"TORCH_NCCL_ASYNC_ERROR_HANDLING", "0"}}));
  }
  for (Subprocess& agent : agents) {
    EXPECT_TRUE(agent.wait().success()) << log("a") << log("b");
  }
  EXPECT_EQ(env("a", 0)["TORCH_NCCL_ASYNC_ERROR_HANDLING"], "0");
  EXPECT_EQ(env("b", 0)["TORCH_NCCL_ASYNC_ERROR_HANDLING"], "0");
}

// A newcomer re-forms the round, but its workers start only once node 0 has
// stopped its old workers and emptied its store: a new worker never sees the
// last round's keys. Node 0's old workers ignore SIGTERM, so they linger for
// the whole shutdown timeout.
TEST_F(ElasticTest, ANewRoundsWorkersStartOnlyOnceNodeZerosStoreIsEmptied) {
  test_support::DaemonProcess daemon;
  const std::vector<std::string> linger = {"--ignore-term", "--only-attempt", "0"};
  const auto node = [&](const std::string& name, int rank) {
    return agent(name, "2:3", daemon.port(), linger,
                 {"--node-rank", std::to_string(rank), "--shutdown-timeout", "1", "--rdzv-conf",
                  "last_call_timeout=0.2"});
  };
  Subprocess a = node("a", 0);
  Subprocess b = node("b", 1);
  ASSERT_TRUE(test_support::eventually([&] { return ready("a") && ready("b"); }, 30s))
      << log("a") << log("b");
  ASSERT_EQ(env("a", 0)["GROUP_RANK"], "0");
  const std::vector<pid_t> old_workers = workers("a");
  Subprocess c = node("c", 2);
  ASSERT_TRUE(test_support::eventually([&] { return ready("c"); }, 30s)) << log("c");
  for (pid_t pid : old_workers) {
    EXPECT_FALSE(alive(pid)) << "c's workers started while node 0's old worker " << pid
                             << " still ran on its store" << log("a") << log("c");
  }
  EXPECT_TRUE(a.waitFor(30s).value_or(ExitStatus{ExitStatus::Kind::Exited, 99}).success());
  EXPECT_TRUE(b.waitFor(30s).value_or(ExitStatus{ExitStatus::Kind::Exited, 99}).success());
  EXPECT_TRUE(c.waitFor(30s).value_or(ExitStatus{ExitStatus::Kind::Exited, 99}).success());
}

// The same over IPv6: an endpoint written as [::1]:port.
TEST_F(ElasticTest, AnIpv6EndpointWorks) {
  const int probe = ::socket(AF_INET6, SOCK_STREAM, 0);
  sockaddr_in6 address{};
  address.sin6_family = AF_INET6;
  address.sin6_addr = in6addr_loopback;
  socklen_t length = sizeof(address);
  const bool have_v6 = probe >= 0 &&
                       ::bind(probe, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0 &&
                       ::getsockname(probe, reinterpret_cast<sockaddr*>(&address), &length) == 0;
  ::close(probe);
  if (!have_v6) {
    GTEST_SKIP() << "no IPv6 loopback (::1) on this host";
  }
  const std::string endpoint = "[::1]:" + std::to_string(ntohs(address.sin6_port));
  std::vector<Subprocess> agents;
  for (const std::string name : {"a", "b"}) {
    agents.push_back(
        launch(name, {"--nnodes", "2", "--nproc-per-node", "1", "--rdzv-backend", "c10d",
                      "--rdzv-endpoint", endpoint, "--rdzv-id", "v6", "--no-python",
                      DDPRUN_FAKE_WORKER, "--env-to", (dir_.path() / name).string()}));
  }
  for (Subprocess& agent : agents) {
    EXPECT_TRUE(agent.wait().success()) << log("a") << log("b");
  }
  EXPECT_EQ(env("a", 0)["WORLD_SIZE"], "2");
  EXPECT_EQ(env("a", 0)["MASTER_ADDR"], "::1");
  EXPECT_NE(env("a", 0)["RANK"], env("b", 0)["RANK"]);
}

// Attempt 0's workers hang; after b's agent is SIGKILLed, a's workers are
// restarted in round 1 as a world of 2 (not counted against --max-restarts=0)
// and, no longer hanging, finish.
TEST_F(ElasticTest, ASigkilledAgentLeavesTheSurvivorsASmallerWorld) {
  test_support::DaemonProcess daemon;
  const std::vector<std::string> hang_first = {"--hang", "--only-attempt", "0"};
  Subprocess a = agent("a", "1:2", daemon.port(), hang_first);
  Subprocess b = agent("b", "1:2", daemon.port(), hang_first);
  ASSERT_TRUE(test_support::eventually([&] { return ready("a") && ready("b"); }, 30s))
      << log("a") << log("b");
  EXPECT_EQ(env("a", 0)["WORLD_SIZE"], "4");
  ::kill(b.pid(), SIGKILL);
  EXPECT_TRUE(a.wait().success()) << log("a");
  auto survivor = env("a", 0);
  EXPECT_EQ(survivor["TORCHELASTIC_RESTART_COUNT"], "1") << log("a") << log("b");
  EXPECT_EQ(survivor["WORLD_SIZE"], "2");
  EXPECT_EQ(survivor["GROUP_WORLD_SIZE"], "1");
  EXPECT_EQ(env("a", 1)["RANK"], "1");
  EXPECT_NE(log("a").find("round 1: node 0 of 1"), std::string::npos) << log("a");
}

// Node b's workers fail on attempt 0 while node a's block, as peers of a
// failed rank do: with --max-restarts=1 both nodes move to round 1 together,
// and the job finishes there.
TEST_F(ElasticTest, AWorkerFailureRestartsEveryNodeIntoTheNextRound) {
  test_support::DaemonProcess daemon;
  const std::vector<std::string> restart = {"--max-restarts", "1"};
  Subprocess a = agent("a", "2", daemon.port(), {"--hang", "--only-attempt", "0"}, restart);
  Subprocess b = agent("b", "2", daemon.port(), {"--exit", "3", "--only-attempt", "0"}, restart);
  EXPECT_TRUE(a.wait().success()) << log("a");
  EXPECT_TRUE(b.wait().success()) << log("b");
  for (const std::string node : {"a", "b"}) {
    EXPECT_EQ(env(node, 0)["TORCHELASTIC_RESTART_COUNT"], "1") << log(node);
    EXPECT_EQ(env(node, 0)["WORLD_SIZE"], "4");
  }
}

// With restarts spent, the failing node aborts the run: the other agent stops
// its (hanging) workers at once and exits non-zero with a clear message,
// instead of hanging until a collective times out.
TEST_F(ElasticTest, SpentRestartsEndTheJobOnEveryNode) {
  test_support::DaemonProcess daemon;
  Subprocess a = agent("a", "2", daemon.port(), {"--hang"});
  Subprocess b = agent("b", "2", daemon.port(), {"--exit", "3"});
  EXPECT_EQ(b.wait().shellCode(), 3) << log("b");
  EXPECT_EQ(a.wait().shellCode(), 1) << log("a");
  EXPECT_NE(log("a").find("the job failed on"), std::string::npos) << log("a");
}

// An agent waiting for a second node that never comes still obeys SIGTERM.
TEST_F(ElasticTest, AnAgentWaitingForARoundStopsOnSigterm) {
  test_support::DaemonProcess daemon;
  Subprocess lonely = agent("a", "2", daemon.port());
  ASSERT_TRUE(test_support::eventually(
      [&] { return log("a").find("joined rendezvous") != std::string::npos; }, 30s));
  ::kill(lonely.pid(), SIGTERM);
  EXPECT_EQ(lonely.wait().shellCode(), 128 + SIGTERM) << log("a");
}

// Unmodified python3-torch workers (gloo, init_process_group from the
// environment) across two elastic agents: four ranks, one all-reduce.
TEST_F(ElasticTest, PythonWorkersAllReduceAcrossTwoNodes) {
  if (std::string(DDPRUN_TORCH_PYTHON).empty()) {
    GTEST_SKIP() << "no Python interpreter that imports torch (install python3-torch)";
  }
  test_support::DaemonProcess daemon;
  std::vector<Subprocess> agents;
  for (const std::string name : {"a", "b"}) {
    agents.push_back(
        launch(name,
               {"--nnodes", "2", "--nproc-per-node", "2", "--rdzv-backend", "c10d",
                "--rdzv-endpoint", "127.0.0.1:" + std::to_string(daemon.port()), "--rdzv-id",
                "python-job", DDPRUN_PYTHON_WORKER},
               {{"PYTHON_EXEC", DDPRUN_TORCH_PYTHON}, {"PYTHONDONTWRITEBYTECODE", "1"}}));
  }
  for (Subprocess& agent : agents) {
    EXPECT_TRUE(agent.wait().success()) << log("a") << log("b");
  }
  const std::string output = log("a") + log("b");
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_NE(output.find("rank " + std::to_string(rank) + " of 4: sum 6, attempt 0"),
              std::string::npos)
        << output;
  }
}

}  // namespace
}  // namespace ddprun::launcher

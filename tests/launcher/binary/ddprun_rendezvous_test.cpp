// The ddprun executable's rendezvous as a user meets it, on loopback with
// fake workers: a static --rdzv-endpoint is the store, --rdzv-conf errors are
// one line and exit 2, a worker that cannot start under c10d is one line (not
// an abort), an agent that waits says for what, where and how long, a static
// node with the wrong --nproc-per-node is refused while the others wait, and
// --ranks-filter picks global ranks across nodes.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "ddprun/launcher/process/subprocess.hpp"
#include "ddprun/test_support/eventually.hpp"
#include "ddprun/test_support/files.hpp"
#include "ddprun_binary_fixture.hpp"

namespace ddprun::launcher {
namespace {

using namespace std::chrono_literals;
using test_support::readFile;
using testing::contains;
using testing::DdprunBinaryTest;
using testing::Outcome;

// This machine's name, as a static agent gives it.
std::string hostName() {
  char name[256] = {};
  return ::gethostname(name, sizeof name - 1) == 0 ? name : "localhost";
}

class DdprunRendezvousTest : public DdprunBinaryTest {
 protected:
  // Waits until ddprun's stderr holds `part`; false after `timeout`.
  bool stderrShows(const std::string& part, std::chrono::milliseconds timeout) {
    return test_support::eventually([&] { return contains(stderrText(), part); }, timeout, 10ms);
  }
  std::string stderrText() const { return readFile(dir_.path() / "stderr"); }

  // A static node of a 2-node job on `endpoint` whose workers each print one line.
  static std::vector<std::string> staticNode(const std::string& endpoint, int node_rank, int nproc,
                                             std::vector<std::string> flags = {}) {
    std::vector<std::string> args = {
        "--nnodes", "2",           "--node-rank", std::to_string(node_rank), "--rdzv-endpoint",
        endpoint,   "--rdzv-conf", "timeout=30",  "--nproc-per-node",        std::to_string(nproc)};
    args.insert(args.end(), flags.begin(), flags.end());
    args.insert(args.end(), {"--no-python", DDPRUN_FAKE_WORKER, "--chatter", "1"});
    return args;
  }
};

// Two static agents on loopback, node 1 started first: node 0 hosts the
// store, ranks come from --node-rank, and both finish through the exit
// barrier. The store is where torchrun puts it: at --rdzv-endpoint when one
// is given (--master-port then unused), else at --master-addr:--master-port.
TEST_F(DdprunRendezvousTest, TwoStaticNodesAgreeOnRanksAndTheStore) {
  const std::string port = std::to_string(test_support::freeLoopbackPort());
  const std::vector<std::vector<std::string>> endpoints = {
      {"--rdzv-endpoint", "127.0.0.1:" + port, "--master-port", "1"},
      {"--master-addr", "127.0.0.1", "--master-port", port}};
  for (const auto& endpoint : endpoints) {
    std::vector<Subprocess> agents;
    for (int node : {1, 0}) {
      const auto env_dir = dir_.path() / ("node" + std::to_string(node));
      std::filesystem::create_directories(env_dir);
      SpawnOptions options;
      options.argv = {DDPRUN_BINARY, "--nnodes", "2", "--node-rank", std::to_string(node)};
      options.argv.insert(options.argv.end(), endpoint.begin(), endpoint.end());
      options.argv.insert(options.argv.end(),
                          {"--rdzv-conf", "timeout=20", "--nproc-per-node", "2", "--no-python",
                           DDPRUN_FAKE_WORKER, "--env-to", env_dir.string()});
      options.env = childEnvironment();
      agents.emplace_back(options);
    }
    for (Subprocess& agent : agents) {
      const auto status = agent.waitFor(30s);
      ASSERT_TRUE(status) << "a static agent never finished: " << endpoint.front();
      EXPECT_TRUE(status->success()) << status->describe();
    }
    for (int node : {0, 1}) {
      for (int local_rank : {0, 1}) {
        const auto env = test_support::readEnvFile(dir_.path() / ("node" + std::to_string(node)) /
                                                   (std::to_string(local_rank) + ".env"));
        EXPECT_EQ(env.at("RANK"), std::to_string(node * 2 + local_rank)) << endpoint.front();
        EXPECT_EQ(env.at("GROUP_RANK"), std::to_string(node));
        EXPECT_EQ(env.at("WORLD_SIZE"), "4");
        EXPECT_EQ(env.at("MASTER_ADDR"), "127.0.0.1");
        EXPECT_EQ(env.at("MASTER_PORT"), port) << endpoint.front();
      }
    }
  }
}

// A bad --rdzv-conf value is one line naming the key and the value, exit 2,
// whatever the backend.
TEST_F(DdprunRendezvousTest, ABadRdzvConfValueIsOneLineAndExitTwo) {
  for (const std::string backend : {"static", "c10d"}) {
    const Outcome outcome =
        runFor({"--nnodes", "2", "--rdzv-backend", backend, "--rdzv-endpoint", "127.0.0.1:1",
                "--rdzv-conf", "timeout=abc", "--no-python", DDPRUN_FAKE_WORKER},
               20s);
    EXPECT_EQ(outcome.status, (ExitStatus{ExitStatus::Kind::Exited, 2})) << backend;
    EXPECT_EQ(outcome.stderr_text.rfind("ddprun: --rdzv-conf timeout 'abc': ", 0), 0u)
        << backend << ": " << outcome.stderr_text;
  }
}

TEST_F(DdprunRendezvousTest, AnUnknownRdzvConfKeyIsOneLineAndExitTwo) {
  const Outcome outcome = runFor(
      {"--standalone", "--rdzv-conf", "join_timeuot=5", "--no-python", DDPRUN_FAKE_WORKER}, 20s);
  EXPECT_EQ(outcome.status, (ExitStatus{ExitStatus::Kind::Exited, 2}));
  EXPECT_EQ(outcome.stderr_text.rfind("ddprun: --rdzv-conf join_timeuot '5': unknown key", 0), 0u)
      << outcome.stderr_text;
}

// A keep-alive that would drop the agent at once (none, negative, no
// attempts, or longer than ddprun can wait) is refused when the flags are
// read: one line naming it (then the usage), exit 2, nothing joined.
TEST_F(DdprunRendezvousTest, AKeepAliveThatWouldDropTheAgentAtOnceIsOneLineAndExitTwo) {
  const std::string endpoint = "127.0.0.1:" + std::to_string(test_support::freeLoopbackPort());
  for (const std::string conf :
       {"keep_alive_interval=0", "keep_alive_interval=-1", "keep_alive_max_attempt=0",
        "keep_alive_interval=1e9,keep_alive_max_attempt=10"}) {
    const Outcome outcome =
        runFor({"--nnodes", "1:2", "--rdzv-backend", "c10d", "--rdzv-endpoint", endpoint,
                "--rdzv-conf", conf, "--no-python", DDPRUN_FAKE_WORKER},
               20s);
    EXPECT_EQ(outcome.status.describe(), "exited with code 2") << conf;
    // One line, then the usage, as for every bad flag.
    const auto end_of_line = outcome.stderr_text.find('\n');
    EXPECT_EQ(outcome.stderr_text.rfind("ddprun: --rdzv-conf keep_alive_", 0), 0u)
        << conf << ": " << outcome.stderr_text;
    EXPECT_EQ(outcome.stderr_text.find("usage: ddprun"), end_of_line + 1)
        << conf << ": " << outcome.stderr_text;
  }
}

// A worker that cannot be started under c10d ends the run with one line and
// exit 1, as under --standalone; it used to abort (std::terminate, 134).
TEST_F(DdprunRendezvousTest, AWorkerThatCannotStartUnderC10dIsOneLine) {
  const std::string endpoint = "127.0.0.1:" + std::to_string(test_support::freeLoopbackPort());
  const Outcome outcome =
      runFor({"--nnodes", "1:2", "--rdzv-backend", "c10d", "--rdzv-endpoint", endpoint,
              "--rdzv-conf", "last_call_timeout=0.1", "--no-python", "/no/such/program"},
             30s);
  EXPECT_EQ(outcome.status, (ExitStatus{ExitStatus::Kind::Exited, 1})) << outcome.stderr_text;
  EXPECT_TRUE(contains(outcome.stderr_text, "cannot run '/no/such/program'"))
      << outcome.stderr_text;
  EXPECT_FALSE(contains(outcome.stderr_text, "terminate called")) << outcome.stderr_text;
}

// Static node 1 before node 0 is up: it says at once that it waits for the
// store node rank 0 hosts, and where; on timeout, one line naming it.
TEST_F(DdprunRendezvousTest, AStaticAgentSaysItWaitsForTheStore) {
  const std::string endpoint = "127.0.0.1:" + std::to_string(test_support::freeLoopbackPort());
  Subprocess agent = start({"--nnodes", "2", "--node-rank", "1", "--rdzv-endpoint", endpoint,
                            "--rdzv-conf", "timeout=3", "--no-python", DDPRUN_FAKE_WORKER});
  EXPECT_TRUE(stderrShows("waiting for", 1500ms)) << stderrText();
  EXPECT_TRUE(contains(stderrText(), endpoint)) << stderrText();
  const Outcome outcome = waitFor(agent, 20s);
  EXPECT_EQ(outcome.status.shellCode(), 1) << outcome.stderr_text;
  EXPECT_TRUE(contains(outcome.stderr_text, "node rank 0")) << outcome.stderr_text;
  EXPECT_TRUE(contains(outcome.stderr_text, "3 s")) << outcome.stderr_text;
}

// Static node 0 alone: it waits for node rank 1 and says so.
TEST_F(DdprunRendezvousTest, AStaticAgentSaysWhichNodesItWaitsFor) {
  const std::string endpoint = "127.0.0.1:" + std::to_string(test_support::freeLoopbackPort());
  Subprocess agent = start({"--nnodes", "3", "--node-rank", "0", "--rdzv-endpoint", endpoint,
                            "--rdzv-conf", "timeout=3", "--no-python", DDPRUN_FAKE_WORKER});
  EXPECT_TRUE(stderrShows("waiting for node rank(s) 1, 2 of 3", 1500ms)) << stderrText();
  const Outcome outcome = waitFor(agent, 20s);
  EXPECT_EQ(outcome.status.shellCode(), 1) << outcome.stderr_text;
  EXPECT_TRUE(contains(outcome.stderr_text, "node rank(s) 1, 2 of 3 did not join"))
      << outcome.stderr_text;
}

// A c10d agent whose endpoint nobody serves yet (is_host=0) says so at once.
TEST_F(DdprunRendezvousTest, AC10dAgentSaysItWaitsForTheRendezvous) {
  const std::string endpoint = "127.0.0.1:" + std::to_string(test_support::freeLoopbackPort());
  Subprocess agent =
      start({"--nnodes", "2", "--rdzv-backend", "c10d", "--rdzv-endpoint", endpoint, "--rdzv-conf",
             "is_host=0,join_timeout=3", "--no-python", DDPRUN_FAKE_WORKER});
  EXPECT_TRUE(stderrShows("waiting for the rendezvous", 1500ms)) << stderrText();
  EXPECT_TRUE(contains(stderrText(), endpoint)) << stderrText();
  const Outcome outcome = waitFor(agent, 20s);
  EXPECT_EQ(outcome.status.shellCode(), 1) << outcome.stderr_text;
  EXPECT_TRUE(contains(outcome.stderr_text, "within join_timeout (3 s)")) << outcome.stderr_text;
}

// A c10d agent alone in a 2-node job: it says it waits for a round, and on
// join_timeout names what never came.
TEST_F(DdprunRendezvousTest, AC10dAgentSaysItWaitsForARound) {
  const std::string endpoint = "127.0.0.1:" + std::to_string(test_support::freeLoopbackPort());
  Subprocess agent = start({"--nnodes", "2", "--rdzv-backend", "c10d", "--rdzv-endpoint", endpoint,
                            "--rdzv-conf", "join_timeout=3", "--no-python", DDPRUN_FAKE_WORKER});
  EXPECT_TRUE(stderrShows("waiting for round 0", 1500ms)) << stderrText();
  const Outcome outcome = waitFor(agent, 20s);
  EXPECT_EQ(outcome.status.shellCode(), 1) << outcome.stderr_text;
  EXPECT_TRUE(contains(outcome.stderr_text, "fewer than 2 nodes joined")) << outcome.stderr_text;
}

// With a range of nodes, round 0 waits for the last call after the minimum
// has joined: the notice names last_call_timeout, so the job does not look
// stuck for those 30 s.
TEST_F(DdprunRendezvousTest, ARangeOfNodesSaysRoundZeroWaitsForTheLastCall) {
  const std::string endpoint = "127.0.0.1:" + std::to_string(test_support::freeLoopbackPort());
  Subprocess agent = start({"--nnodes", "2:4", "--rdzv-backend", "c10d", "--rdzv-endpoint",
                            endpoint, "--rdzv-conf", "join_timeout=3,last_call_timeout=7",
                            "--no-python", DDPRUN_FAKE_WORKER});
  EXPECT_TRUE(stderrShows("last_call_timeout (7 s) after the 2 needed have", 1500ms))
      << stderrText();
  EXPECT_TRUE(contains(stderrText(), "forms when 4 nodes have joined")) << stderrText();
  const Outcome outcome = waitFor(agent, 20s);
  EXPECT_EQ(outcome.status.shellCode(), 1) << outcome.stderr_text;
}

// Two agents claiming one --node-rank: the one refused says so and exits 2
// (bad flags), though the claim is decided on the agent's waiter thread.
TEST_F(DdprunRendezvousTest, ANodeRankClaimedTwiceIsExitTwo) {
  const std::string endpoint = "127.0.0.1:" + std::to_string(test_support::freeLoopbackPort());
  const auto node = [&](int rank) {
    SpawnOptions options;
    options.argv = {DDPRUN_BINARY, "--nnodes",           "3",
                    "--node-rank", std::to_string(rank), "--rdzv-endpoint",
                    endpoint,      "--rdzv-conf",        "timeout=4",
                    "--no-python", DDPRUN_FAKE_WORKER};
    options.env = childEnvironment();
    return Subprocess(options);
  };
  Subprocess zero = node(0);
  Subprocess first = node(1);
  Subprocess second = node(1);
  std::vector<int> codes;
  for (Subprocess* agent : {&zero, &first, &second}) {
    const auto status = agent->waitFor(20s);
    ASSERT_TRUE(status) << "an agent still runs";
    codes.push_back(status->shellCode());
  }
  EXPECT_TRUE(codes[1] == 2 || codes[2] == 2)
      << "the refused claimant exited " << codes[1] << " and " << codes[2];
}

// A node whose worker cannot start says so at once, not after waiting for
// the other nodes at the exit barrier.
TEST_F(DdprunRendezvousTest, AWorkerThatCannotStartIsSaidBeforeTheExitBarrier) {
  const std::string endpoint = "127.0.0.1:" + std::to_string(test_support::freeLoopbackPort());
  SpawnOptions zero;
  zero.argv = {DDPRUN_BINARY,
               "--nnodes",
               "2",
               "--node-rank",
               "0",
               "--rdzv-endpoint",
               endpoint,
               "--no-python",
               DDPRUN_FAKE_WORKER,
               "--after",
               (dir_.path() / "never").string()};
  zero.env = childEnvironment();
  Subprocess node0(zero);
  Subprocess node1 = start({"--nnodes", "2", "--node-rank", "1", "--rdzv-endpoint", endpoint,
                            "--no-python", "/no/such/program"});
  EXPECT_TRUE(stderrShows("cannot run '/no/such/program'", 5s)) << stderrText();
  node0.signalGroup(SIGKILL);
  node1.signalGroup(SIGKILL);
}

// Node 0's --nproc-per-node is the job's: node 1 started with another count
// exits 2 in one line, node 0 keeps waiting and says why, and node 1 started
// again with the right count finishes the job with it.
TEST_F(DdprunRendezvousTest, AStaticNodeWithAnotherNprocIsRefusedAndNodeZeroWaitsForItsFix) {
  const std::string endpoint = "127.0.0.1:" + std::to_string(test_support::freeLoopbackPort());
  Subprocess node0 = start(staticNode(endpoint, 0, 2));
  Subprocess wrong = start(staticNode(endpoint, 1, 3), "wrong");
  const auto refused = wrong.waitFor(20s);
  ASSERT_TRUE(refused) << "the wrong node still runs";
  EXPECT_EQ(refused->shellCode(), 2);
  const std::string line = outputOf("wrong", "stderr");
  EXPECT_TRUE(contains(line, "ddprun: static rendezvous refused this node: node rank 1 (" +
                                 hostName() + ") has --nproc-per-node 3 but node rank 0 (" +
                                 hostName() + ") has 2"))
      << line;
  EXPECT_TRUE(stderrShows("start node rank 1 again with --nproc-per-node 2", 10s)) << stderrText();
  EXPECT_FALSE(node0.tryWait()) << "node 0 ended with the wrong node: " << stderrText();

  Subprocess fixed = start(staticNode(endpoint, 1, 2), "fixed");
  for (Subprocess* agent : {&node0, &fixed}) {
    const auto status = agent->waitFor(30s);
    ASSERT_TRUE(status) << "an agent never finished";
    EXPECT_TRUE(status->success()) << status->describe() << "\n" << stderrText();
  }
  EXPECT_TRUE(contains(outputOf("fixed", "stdout"), "rank 3 line 0"))
      << outputOf("fixed", "stdout");
}

// --ranks-filter names global ranks: on a 2-node job of 2 workers each,
// "3" shows node 1's second worker and nothing of node 0; the log files keep
// every rank.
TEST_F(DdprunRendezvousTest, RanksFilterPicksGlobalRanksOnEveryNode) {
  const std::string endpoint = "127.0.0.1:" + std::to_string(test_support::freeLoopbackPort());
  const auto logs = dir_.path() / "logs";
  const std::vector<std::string> flags = {"--ranks-filter", "3",     "--log-dir",
                                          logs.string(),    "--tee", "1"};
  Subprocess node0 = start(staticNode(endpoint, 0, 2, flags), "node0");
  Subprocess node1 = start(staticNode(endpoint, 1, 2, flags), "node1");
  for (Subprocess* agent : {&node0, &node1}) {
    const auto status = agent->waitFor(30s);
    ASSERT_TRUE(status) << "an agent never finished";
    EXPECT_TRUE(status->success()) << status->describe();
  }
  EXPECT_EQ(outputOf("node0", "stdout"), "");
  EXPECT_EQ(outputOf("node1", "stdout"), "[default1]:rank 3 line 0 end\n");
  int rank_lines_in_files = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(logs)) {
    if (entry.path().filename() == "stdout.log") {
      rank_lines_in_files += testing::countOf(readFile(entry.path()), " end\n");
    }
  }
  EXPECT_EQ(rank_lines_in_files, 4);
}

}  // namespace
}  // namespace ddprun::launcher

// `train` (LibTorch DDP over Gloo) across real (namespaced) hosts: two or
// three agents on their own addresses, ddprund on another, the snapshot on the
// shared filesystem. Gloo talks over each host's veth (GLOO_SOCKET_IFNAME),
// the workers' store is on node 0's address.
#include <signal.h>

#include <regex>

#include "netns_train_fixture.hpp"

namespace ddprun::netns_test {
namespace {

// 2 nodes x 2 workers, --nnodes 2 fixed: both agents succeed, the snapshot
// holds every epoch, rank 0 (on node 0) trained as a world of 4.
TEST_F(NetnsTrainTest, TwoHostsTrainAsAWorldOfFour) {
  buildLab(2);
  const auto start = std::chrono::steady_clock::now();
  Subprocess a = agent("a", "h1", "2", train(3));
  Subprocess b = agent("b", "h2", "2", train(3));
  const auto a_status = a.waitFor(180s);
  const auto b_status = b.waitFor(60s);
  report("two_hosts_three_epochs_ms", millisSince(start));
  ASSERT_TRUE(a_status && a_status->success()) << describe(a_status) << logs({"a", "b"});
  ASSERT_TRUE(b_status && b_status->success()) << describe(b_status) << logs({"a", "b"});
  EXPECT_EQ(snapshotEpochs(), 3);
  const std::string node0 = groupRank("a", 0) == 0 ? "a" : "b";
  EXPECT_EQ(groupRank(node0 == "a" ? "b" : "a", 0), 1) << logs({"a", "b"});
  EXPECT_TRUE(contains(log(node0), "world 4 (gloo), batch 32 x 4")) << logs({"a", "b"});
  const std::string node0_host = node0 == "a" ? "h1" : "h2";
  EXPECT_TRUE(
      contains(log(node0), "ranks 0..1 of 4, workers' store at " + lab_->address(node0_host) + ":"))
      << log(node0);
}

// The mission's own line, as a user types it on each of two hosts:
//   ddprun --nnodes=2 --node-rank=N --nproc-per-node=2 --rdzv-endpoint=h1:29603 train ...
// (plus --rdzv-backend=c10d for the elastic variant): the endpoint is a host
// name, `train` is found on PATH, node 1 starts before node 0, and nothing
// else is given. Both train 2 x 2 to the end. Parameter: extra flags.
class NetnsMissionLineTest : public NetnsTrainTest,
                             public ::testing::WithParamInterface<std::vector<std::string>> {
 protected:
  std::vector<std::string> missionLine(int node_rank) {
    std::vector<std::string> args = {"--nnodes=2", "--node-rank=" + std::to_string(node_rank),
                                     "--nproc-per-node=2", "--rdzv-endpoint=h1:29603"};
    args.insert(args.end(), GetParam().begin(), GetParam().end());
    std::vector<std::string> program = train(3);
    program.front() = "train";
    args.insert(args.end(), program.begin(), program.end());
    return args;
  }
};

TEST_P(NetnsMissionLineTest, TrainsAcrossTwoHostsToTheEnd) {
  buildLab(2, /*with_daemon=*/false);
  const std::string train_dir = fs::path(TRAIN_BINARY).parent_path().string();
  Subprocess b = ddprunOn("b", "h2", missionLine(1), train_dir);
  Subprocess a = ddprunOn("a", "h1", missionLine(0), train_dir);
  const auto a_status = a.waitFor(180s);
  const auto b_status = b.waitFor(60s);
  ASSERT_TRUE(a_status && a_status->success()) << describe(a_status) << logs({"a", "b"});
  ASSERT_TRUE(b_status && b_status->success()) << describe(b_status) << logs({"a", "b"});
  EXPECT_EQ(snapshotEpochs(), 3);
  EXPECT_EQ(groupRank("a", 0), 0) << logs({"a", "b"});
  EXPECT_EQ(groupRank("b", 0), 1) << logs({"a", "b"});
  EXPECT_TRUE(contains(log("a"), "world 4 (gloo), batch 32 x 4")) << log("a");
}

INSTANTIATE_TEST_SUITE_P(Backends, NetnsMissionLineTest,
                         ::testing::Values(std::vector<std::string>{},
                                           std::vector<std::string>{"--rdzv-backend=c10d"}),
                         [](const ::testing::TestParamInfo<std::vector<std::string>>& backend) {
                           return backend.param.empty() ? std::string("StaticByDefault")
                                                        : std::string("C10d");
                         });

// The static line's store is node 0's, at the endpoint: every worker's
// MASTER_ADDR:MASTER_PORT is h1:29603 (torchrun reads a static endpoint so).
TEST_F(NetnsTrainTest, TheStaticLinesWorkersUseTheEndpointAsTheirStore) {
  buildLab(2, /*with_daemon=*/false);
  std::vector<Subprocess> agents;
  for (int node : {1, 0}) {
    const std::string name = node == 0 ? "a" : "b";
    agents.push_back(ddprunOn(name, node == 0 ? "h1" : "h2",
                              {"--nnodes=2", "--node-rank=" + std::to_string(node),
                               "--nproc-per-node=2", "--rdzv-endpoint=h1:29603", "--no-python",
                               DDPRUN_FAKE_WORKER, "--env-to", dirOf(name).string()}));
  }
  for (Subprocess& agent : agents) {
    const auto status = agent.waitFor(60s);
    ASSERT_TRUE(status && status->success()) << describe(status) << logs({"a", "b"});
  }
  for (const std::string name : {"a", "b"}) {
    const auto env = test_support::readEnvFile(dirOf(name) / "1.env");
    EXPECT_EQ(env.at("MASTER_ADDR"), "h1") << name;
    EXPECT_EQ(env.at("MASTER_PORT"), "29603") << name;
  }
  EXPECT_TRUE(contains(log("a"), "workers' store at h1:29603")) << log("a");
}

// Node losses race with the survivors' own workers: a killed worker's Gloo
// sockets reset its peers, which may fail (and be seen failing by their
// agent) before that agent acts on ddprund's push of the next round. The
// agent counts such a failure as the membership change it is, so the default
// --max-restarts 0 must survive a lost node.
const std::vector<std::string> kDefaultRestarts = {};

// --nnodes 1:2; one agent is SIGKILLed mid-training (its workers die with it).
// The survivor's workers are restarted at once as a world of 2, resume from
// the shared snapshot and finish. Parameter: the killed node's group rank
// (0: it hosted the workers' store and its rank 0 wrote the snapshots).
class NetnsTrainKillTest : public NetnsTrainTest, public ::testing::WithParamInterface<int> {};

TEST_P(NetnsTrainKillTest, TheSurvivorResumesFromTheSnapshotAsAWorldOfTwo) {
  buildLab(2);
  constexpr int kEpochs = 30;
  const std::vector<std::string> program = train(kEpochs, {"--samples", "20000"});
  Subprocess a = agent("a", "h1", "1:2", program, kDefaultRestarts);
  Subprocess b = agent("b", "h2", "1:2", program, kDefaultRestarts);
  // Mid-training: round 0 (both nodes) has saved two snapshots.
  const bool training = test_support::eventually(
      [&] {
        return groupRank("a", 0) >= 0 && groupRank("b", 0) >= 0 &&
               savesAfter(log("a") + log("b"), 0) >= 2;
      },
      120s, 20ms);
  ASSERT_TRUE(training) << logs({"a", "b"});
  const std::string victim = groupRank("a", 0) == GetParam() ? "a" : "b";
  const std::string survivor = victim == "a" ? "b" : "a";
  Subprocess& victim_agent = victim == "a" ? a : b;
  Subprocess& survivor_agent = survivor == "a" ? a : b;
  EXPECT_TRUE(contains(log("a") + log("b"), "world 4 (gloo)")) << logs({"a", "b"});

  const auto killed = std::chrono::steady_clock::now();
  ASSERT_EQ(::kill(victim_agent.pid(), SIGKILL), 0);
  // Round 1 as a rule; a later one if the race above cost a restart too.
  const std::regex alone(R"(round ([0-9]+): node 0 of 1, ranks 0\.\.1 of 2)");
  std::string survivor_log;  // `round` points into it
  std::smatch round;
  const bool moved_on = test_support::eventually(
      [&] {
        survivor_log = log(survivor);
        return std::regex_search(survivor_log, round, alone);
      },
      30s, 10ms);
  report("kill_to_survivor_alone_ms", millisSince(killed));
  ASSERT_TRUE(moved_on) << logs({"a", "b"});
  const auto status = survivor_agent.waitFor(240s);
  report("kill_to_survivor_done_ms", millisSince(killed));
  ASSERT_TRUE(status && status->success()) << describe(status) << logs({"a", "b"});

  std::cout << "[ netns    ] the survivor ran alone from round " << round[1].str() << std::endl;
  const std::string text = log(survivor);
  const std::string after = text.substr(text.find(round[0].str()));
  EXPECT_TRUE(contains(after, "train: resuming from " + snapshot() + " after epoch")) << text;
  EXPECT_TRUE(contains(after, "world 2 (gloo), batch 32 x 2")) << text;
  EXPECT_EQ(snapshotEpochs(), kEpochs);
  EXPECT_FALSE(daemon_->exitedStatus().has_value()) << "ddprund died";
}

INSTANTIATE_TEST_SUITE_P(KilledNode, NetnsTrainKillTest, ::testing::Values(1, 0), groupRankName);

// --nnodes 1:3: two hosts train as a world of 4, then a third host's agent
// joins mid-training; the job re-forms at once and all three end up in a
// round of world 6, which resumes from the snapshot and finishes.
TEST_F(NetnsTrainTest, AThirdHostJoiningMidTrainingGrowsTheWorldToSix) {
  buildLab(3);
  constexpr int kEpochs = 30;
  // last_call_timeout=1: round 0 need not wait 30 s for a third node.
  const std::vector<std::string> launcher_args = {"--rdzv-conf", "last_call_timeout=1"};
  const std::vector<std::string> program = train(kEpochs, {"--samples", "20000"});
  Subprocess a = agent("a", "h1", "1:3", program, launcher_args);
  Subprocess b = agent("b", "h2", "1:3", program, launcher_args);
  // Training as a world of 4 (round 0, or round 1 if b came after the last
  // call), with a snapshot saved by that world.
  const bool training = test_support::eventually(
      [&] {
        const std::string text = log("a") + log("b");
        const auto world4 = text.find("world 4 (gloo)");
        return world4 != std::string::npos && savesAfter(text, world4) >= 1;
      },
      120s, 20ms);
  ASSERT_TRUE(training) << logs({"a", "b"});

  const auto joined = std::chrono::steady_clock::now();
  Subprocess c = agent("c", "h3", "1:3", program, launcher_args);
  const std::regex in_six(R"(round ([0-9]+): node [0-2] of 3, ranks [0-9]+\.\.[0-9]+ of 6)");
  const bool grown = test_support::eventually(
      [&] {
        for (const std::string name : {"a", "b", "c"}) {
          const std::string text = log(name);
          if (!std::regex_search(text, in_six)) {
            return false;
          }
        }
        return true;
      },
      60s, 20ms);
  report("join_to_world_of_six_ms", millisSince(joined));
  ASSERT_TRUE(grown) << logs({"a", "b", "c"});

  const auto a_status = a.waitFor(240s);
  const auto b_status = b.waitFor(60s);
  const auto c_status = c.waitFor(60s);
  report("join_to_done_ms", millisSince(joined));
  EXPECT_TRUE(a_status && a_status->success()) << describe(a_status) << logs({"a", "b", "c"});
  EXPECT_TRUE(b_status && b_status->success()) << describe(b_status) << logs({"a", "b", "c"});
  EXPECT_TRUE(c_status && c_status->success()) << describe(c_status) << logs({"a", "b", "c"});
  const std::string all = log("a") + log("b") + log("c");
  EXPECT_TRUE(contains(all, "world 6 (gloo), batch 32 x 6")) << all;
  EXPECT_TRUE(contains(all, "train: resuming from " + snapshot() + " after epoch")) << all;
  EXPECT_EQ(snapshotEpochs(), kEpochs);
}

}  // namespace
}  // namespace ddprun::netns_test

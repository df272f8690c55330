// Elastic c10d jobs across real (namespaced) hosts with fake workers: each
// agent on its own host and address, ddprund on a third. What loopback cannot
// show: a host that falls silent (its link cut, no FIN) is dropped by the
// keep-alive, and the external daemon outlives the node that hosted the
// workers' store.
#include <signal.h>

#include <set>

#include "netns_job.hpp"

namespace ddprun::netns_test {
namespace {

class NetnsElasticTest : public NetnsJobTest {
 protected:
  // An agent of 2 fake workers writing their environment and a ready file to
  // <tmp>/<name>/; attempt 0's workers hang until stopped.
  Subprocess hangingAgent(const std::string& name, const std::string& host,
                          const std::vector<std::string>& launcher_args = {}) {
    const std::string dir = dirOf(name).string();
    fs::create_directories(dir);
    return agent(
        name, host, "1:2",
        {DDPRUN_FAKE_WORKER, "--env-to", dir, "--ready-to", dir, "--hang", "--only-attempt", "0"},
        launcher_args);
  }

  std::map<std::string, std::string> env(const std::string& name, int local_rank) const {
    return test_support::readEnvFile(dirOf(name) / (std::to_string(local_rank) + ".env"));
  }

  bool ready(const std::string& name) const {
    return fs::exists(dirOf(name) / "0.ready") && fs::exists(dirOf(name) / "1.ready");
  }

  // Both local workers of `name` run attempt `attempt`.
  bool inAttempt(const std::string& name, int attempt) const {
    const std::string value = std::to_string(attempt);
    return env(name, 0)["TORCHELASTIC_RESTART_COUNT"] == value &&
           env(name, 1)["TORCHELASTIC_RESTART_COUNT"] == value;
  }

  // Starts agents a (h1) and b (h2) and waits until both run round 0 as a
  // world of 4; returns the name of the agent that is group rank
  // `group_rank` in round 0.
  std::string startPair(std::optional<Subprocess>& a, std::optional<Subprocess>& b, int group_rank,
                        const std::vector<std::string>& launcher_args = {}) {
    a.emplace(hangingAgent("a", "h1", launcher_args));
    b.emplace(hangingAgent("b", "h2", launcher_args));
    const bool both_ready = test_support::eventually(
        [&] { return inAttempt("a", 0) && inAttempt("b", 0) && ready("a") && ready("b"); }, 60s,
        20ms);
    EXPECT_TRUE(both_ready) << logs({"a", "b"});
    if (!both_ready) {
      return "";
    }
    std::set<std::string> ranks;
    for (const std::string node : {"a", "b"}) {
      for (int local_rank : {0, 1}) {
        auto worker = env(node, local_rank);
        EXPECT_EQ(worker["WORLD_SIZE"], "4") << node;
        EXPECT_EQ(worker["GROUP_WORLD_SIZE"], "2") << node;
        ranks.insert(worker["RANK"]);
      }
    }
    EXPECT_EQ(ranks, (std::set<std::string>{"0", "1", "2", "3"}));
    // Each node's store address is the address it reaches ddprund from.
    const std::string master = env("a", 0)["MASTER_ADDR"];
    EXPECT_EQ(master, env("b", 0)["GROUP_RANK"] == "0" ? lab_->address("h2") : lab_->address("h1"));
    return env("a", 0)["GROUP_RANK"] == std::to_string(group_rank) ? "a" : "b";
  }

  // After a lost node: the survivor's workers run round 1 alone.
  void expectAloneInRoundOne(const std::string& survivor) {
    auto worker = env(survivor, 0);
    EXPECT_EQ(worker["TORCHELASTIC_RESTART_COUNT"], "1");
    EXPECT_EQ(worker["WORLD_SIZE"], "2");
    EXPECT_EQ(worker["GROUP_WORLD_SIZE"], "1");
    EXPECT_EQ(worker["GROUP_RANK"], "0");
    EXPECT_EQ(worker["RANK"], "0");
    EXPECT_EQ(env(survivor, 1)["RANK"], "1");
    const std::string host = survivor == "a" ? "h1" : "h2";
    EXPECT_EQ(worker["MASTER_ADDR"], lab_->address(host)) << "the survivor hosts the store";
    EXPECT_TRUE(contains(log(survivor), "round 1: node 0 of 1, ranks 0..1 of 2")) << log(survivor);
  }
};

// The link of one host is set down on the bridge's side: its agent goes
// silent without closing anything, so only the keep-alive (1 s x 2) can tell.
// The other agent's workers must restart as a world of 2 within the
// keep-alive bound plus slack. Parameter: the silenced node's group rank
// (0: it also hosted the workers' store).
class NetnsLinkDownTest : public NetnsElasticTest, public ::testing::WithParamInterface<int> {};

TEST_P(NetnsLinkDownTest, ASilentHostIsDroppedAfterTheKeepAliveAndTheOtherRestartsAtWorldTwo) {
  buildLab(2);
  const std::vector<std::string> keep_alive = {"--rdzv-conf",
                                               "keep_alive_interval=1,keep_alive_max_attempt=2"};
  std::optional<Subprocess> a;
  std::optional<Subprocess> b;
  const std::string silenced = startPair(a, b, GetParam(), keep_alive);
  ASSERT_FALSE(silenced.empty());
  const std::string survivor = silenced == "a" ? "b" : "a";
  Subprocess& survivor_agent = survivor == "a" ? *a : *b;

  // Heartbeats cross the bridge: for 1.5 keep-alive timeouts (3 s) no
  // live agent is dropped. This window only watches for a change that must
  // not come; it also puts the cut at some point of the heartbeat cycle
  // instead of right after the join.
  const bool dropped_too_early =
      test_support::eventually([&] { return !inAttempt("a", 0) || !inAttempt("b", 0); }, 3s, 50ms);
  ASSERT_FALSE(dropped_too_early) << "a live agent was dropped" << logs({"a", "b"});

  const auto cut = std::chrono::steady_clock::now();
  lab_->setLink(silenced == "a" ? "h1" : "h2", false);
  const bool restarted =
      test_support::eventually([&] { return inAttempt(survivor, 1); }, 30s, 10ms);
  const long restart_ms = millisSince(cut);
  report("link_down_to_survivor_restarted_ms", restart_ms);
  ASSERT_TRUE(restarted) << logs({"a", "b"});
  // The keep-alive timeout is 2 s after the last heartbeat, which was at
  // most 1 s before the cut; 10 s leaves room for a loaded machine.
  EXPECT_LT(restart_ms, 10'000) << logs({"a", "b"});

  const auto status = survivor_agent.waitFor(60s);
  ASSERT_TRUE(status && status->success()) << describe(status) << logs({"a", "b"});
  expectAloneInRoundOne(survivor);
  EXPECT_FALSE(daemon_->exitedStatus().has_value()) << "ddprund died";
  // The silenced agent, cut off, still runs its hanging workers; it is
  // killed with them when the test ends.
  EXPECT_FALSE((silenced == "a" ? *a : *b).tryWait().has_value()) << log(silenced);
}

// The silenced host's link comes back after the job has ended without it:
// ddprund told its agent it was dropped (the event waits in the store), so the
// agent stops its workers, says it was dropped, and exits non-zero instead of
// running on alone.
TEST_P(NetnsLinkDownTest, AHealedHostThatWasDroppedIsToldTheJobIsOver) {
  buildLab(2);
  const std::vector<std::string> keep_alive = {"--rdzv-conf",
                                               "keep_alive_interval=1,keep_alive_max_attempt=2"};
  std::optional<Subprocess> a;
  std::optional<Subprocess> b;
  const std::string silenced = startPair(a, b, GetParam(), keep_alive);
  ASSERT_FALSE(silenced.empty());
  Subprocess& silenced_agent = silenced == "a" ? *a : *b;
  Subprocess& survivor_agent = silenced == "a" ? *b : *a;
  lab_->setLink(silenced == "a" ? "h1" : "h2", false);
  const auto status = survivor_agent.waitFor(60s);
  ASSERT_TRUE(status && status->success()) << describe(status) << logs({"a", "b"});

  const auto healed = std::chrono::steady_clock::now();
  lab_->setLink(silenced == "a" ? "h1" : "h2", true);
  const auto silenced_status = silenced_agent.waitFor(30s);
  report("link_up_to_dropped_agent_exit_ms", millisSince(healed));
  ASSERT_TRUE(silenced_status.has_value())
      << "the dropped agent still runs after its link came back" << logs({"a", "b"});
  EXPECT_FALSE(silenced_status->success()) << logs({"a", "b"});
  // It says why, and only that: nothing about another agent closing the job.
  const std::string silenced_log = log(silenced);
  EXPECT_TRUE(contains(silenced_log, "the rendezvous dropped this node")) << silenced_log;
  EXPECT_FALSE(contains(silenced_log, "closed by another agent")) << silenced_log;
}

INSTANTIATE_TEST_SUITE_P(SilencedNode, NetnsLinkDownTest, ::testing::Values(1, 0), groupRankName);

// The agent that was node 0 in round 0 (it hosted the workers' store) is
// SIGKILLed. The external ddprund on h0 does not care: the other agent gets
// round 1 as node 0 of 1, its workers finish, and ddprund still runs and
// still serves a new job.
TEST_F(NetnsElasticTest, TheExternalDaemonOutlivesTheLossOfNodeZero) {
  buildLab(2);
  std::optional<Subprocess> a;
  std::optional<Subprocess> b;
  const std::string victim = startPair(a, b, 0);
  ASSERT_FALSE(victim.empty());
  const std::string survivor = victim == "a" ? "b" : "a";
  Subprocess& victim_agent = victim == "a" ? *a : *b;
  Subprocess& survivor_agent = survivor == "a" ? *a : *b;
  EXPECT_EQ(env(victim, 0)["GROUP_RANK"], "0");

  const auto killed = std::chrono::steady_clock::now();
  ASSERT_EQ(::kill(victim_agent.pid(), SIGKILL), 0);
  const bool restarted =
      test_support::eventually([&] { return inAttempt(survivor, 1); }, 30s, 10ms);
  report("kill_to_survivor_restarted_ms", millisSince(killed));
  ASSERT_TRUE(restarted) << logs({"a", "b"});
  const auto status = survivor_agent.waitFor(60s);
  ASSERT_TRUE(status && status->success()) << describe(status) << logs({"a", "b"});
  expectAloneInRoundOne(survivor);
  const auto victim_status = victim_agent.waitFor(10s);
  EXPECT_TRUE(victim_status && victim_status->kind == ExitStatus::Kind::Signaled &&
              victim_status->code == SIGKILL)
      << describe(victim_status);

  EXPECT_FALSE(daemon_->exitedStatus().has_value()) << "ddprund died: " << daemon_->stderrText();
  // And it still serves: a fresh one-node job on h1 runs to the end.
  const std::string dir = dirOf("c").string();
  fs::create_directories(dir);
  Subprocess c =
      agent("c", "h1", "1", {DDPRUN_FAKE_WORKER, "--env-to", dir}, {}, "netns-job-after");
  const auto after = c.waitFor(60s);
  EXPECT_TRUE(after && after->success()) << describe(after) << logs({"c"});
  EXPECT_EQ(env("c", 0)["WORLD_SIZE"], "2");
  EXPECT_FALSE(daemon_->exitedStatus().has_value()) << "ddprund died";
}

// Debian maps a machine's own name to 127.0.1.1, so the first host resolves
// the endpoint's name to loopback while the others resolve it to its
// address (as under Slurm, where the endpoint is the first host's name). Its
// agent must host the rendezvous where the others reach it, and advertise
// its workers' store by that name, not by the loopback address it reached
// the endpoint from.
TEST_F(NetnsElasticTest, AFirstHostWhoseNameIsLoopbackThereHostsForTheOthers) {
  buildLab(2, /*with_daemon=*/false);
  lab_->nameItselfLoopback("h1");
  const auto line = [this](const std::string& name, int node_rank) {
    return std::vector<std::string>{"--nnodes=2",
                                    "--node-rank=" + std::to_string(node_rank),
                                    "--nproc-per-node=2",
                                    "--rdzv-backend=c10d",
                                    "--rdzv-endpoint=h1:29603",
                                    "--rdzv-id=loopback-name",
                                    "--rdzv-conf=join_timeout=20",
                                    "--no-python",
                                    DDPRUN_FAKE_WORKER,
                                    "--env-to",
                                    dirOf(name).string()};
  };
  Subprocess b = ddprunOn("b", "h2", line("b", 1));
  Subprocess a = ddprunOn("a", "h1", line("a", 0));
  for (Subprocess* agent : {&a, &b}) {
    const auto status = agent->waitFor(60s);
    ASSERT_TRUE(status && status->success()) << describe(status) << logs({"a", "b"});
  }
  for (const std::string name : {"a", "b"}) {
    const auto env = test_support::readEnvFile(dirOf(name) / "0.env");
    EXPECT_EQ(env.at("WORLD_SIZE"), "4") << name;
    EXPECT_EQ(env.at("MASTER_ADDR"), "h1") << name << logs({"a", "b"});
  }
}

}  // namespace
}  // namespace ddprun::netns_test

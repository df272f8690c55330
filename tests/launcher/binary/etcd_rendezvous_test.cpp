// The etcd-v3 rendezvous with real ddprun agents, fake workers and a real
// 3-member etcd cluster on loopback: a lost agent (the coordinating one or
// another) re-forms the job at the smaller world within the lease, etcd
// without quorum for 10 s costs the running workers nothing, and an etcd
// that cannot be reached, or not trusted, ends the agent with one line.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "ddprun/test_support/files.hpp"
#include "etcd_job_fixture.hpp"

namespace ddprun::launcher {
namespace {

using namespace std::chrono_literals;

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using test_support::contains;
using testing::alive;
using testing::EtcdJobTest;

const std::vector<std::string> kAgents = {"a", "b", "c"};

// What an agent logs when it revoked a lease etcd said went unrenewed.
const std::string kRevokedALostLease = "has not renewed its etcd lease";

// Workers that hang in round 0 and succeed at once in any later round.
const std::vector<std::string> kHangInFirstRound = {"--hang", "--only-attempt", "0"};

class EtcdRendezvousTest : public EtcdJobTest {
 protected:
  // Three agents of --nnodes 2:3 with kHangInFirstRound workers, all in
  // round 0 (world 6).
  void startThreeAgents(const std::string& conf = kShortLeases) {
    for (const std::string& name : kAgents) {
      agents_.push_back(fakeAgent(name, "2:3", kHangInFirstRound, conf));
    }
    ASSERT_TRUE(test_support::eventually(
        [&] {
          for (const std::string& name : kAgents) {
            if (!ready(name) || roundAndWorld(name) != std::pair{0, 6}) return false;
          }
          return true;
        },
        30s))
        << logs(kAgents);
    ASSERT_TRUE(test_support::eventually([&] { return coordinators(kAgents).size() == 1; }, 10s))
        << logs(kAgents);
  }

  Subprocess& agentNamed(const std::string& name) {
    return agents_.at(static_cast<std::size_t>(name[0] - 'a'));
  }

  // Kills `victim`'s agent (or, with `ddprun_pid`, the pid ddprun was
  // started as: its guardian), and returns the time from the kill until both
  // other agents' workers run in a newer round (or 10 s if they never do).
  Clock::duration killAndTimeTheRestart(const std::string& victim,
                                        const std::vector<std::string>& survivors,
                                        bool ddprun_pid = false) {
    const auto killed_at = Clock::now();
    if (ddprun_pid) {
      EXPECT_EQ(::kill(agentNamed(victim).pid(), SIGKILL), 0);
    } else {
      killAgent(agentNamed(victim));
    }
    test_support::eventually(
        [&] {
          for (const std::string& name : survivors) {
            if (roundAndWorld(name).first < 1) return false;
          }
          return true;
        },
        10s, 2ms);
    return Clock::now() - killed_at;
  }

  // Both survivors' workers ran at world 4 (2 nodes x 2) in the same newer
  // round, and both agents exit 0; the victim's ddprun ends.
  void expectTheSurvivorsFinishAtWorldFour(const std::string& victim,
                                           const std::vector<std::string>& survivors) {
    const auto round = roundAndWorld(survivors[0]);
    EXPECT_GE(round.first, 1) << logs(kAgents);
    for (const std::string& name : survivors) {
      EXPECT_EQ(roundAndWorld(name), (std::pair{round.first, 4})) << logs(kAgents);
      const auto status = agentNamed(name).waitFor(30s);
      ASSERT_TRUE(status) << name << " still runs" << logs(kAgents);
      EXPECT_TRUE(status->success()) << name << ": " << status->shellCode() << logs(kAgents);
    }
    EXPECT_TRUE(agentNamed(victim).waitFor(10s)) << victim << "'s ddprun still runs";
  }

  // etcd down (`members` of its three) when the agents start: each starts its
  // view of etcd before its lease. With every member down both fail; with one
  // member up the view is served (a watch and a member's own copy need no
  // quorum) while the lease waits. The agents say they wait, and once etcd
  // serves again they take their leases and form the round, which finishes.
  void agentsStartedWhileEtcdIsDownFormTheRound(int members) {
    for (int member = 0; member < members; ++member) {
      cluster().kill(member);
    }
    Subprocess a = fakeAgent("a", "2", {});
    Subprocess b = fakeAgent("b", "2", {});
    ASSERT_TRUE(logShows("a", "waiting for etcd", 20s) && logShows("b", "waiting for etcd", 20s))
        << logs({"a", "b"});
    cluster().restartAll();
    expectSuccessInRoundZeroAtWorldFour(a, "a");
    expectSuccessInRoundZeroAtWorldFour(b, "b");
  }

  void expectSuccessInRoundZeroAtWorldFour(Subprocess& agent, const std::string& name) {
    const auto status = agent.waitFor(30s);
    ASSERT_TRUE(status) << name << " still runs" << logs({"a", "b"});
    EXPECT_TRUE(status->success()) << name << ": " << status->shellCode() << logs({"a", "b"});
    EXPECT_EQ(roundAndWorld(name), (std::pair{0, 4})) << logs({"a", "b"});
  }

  static long long millis(Clock::duration elapsed) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(elapsed).count();
  }

  std::vector<Subprocess> agents_;
};

// A non-coordinating agent is SIGKILLed: its lease ends within the TTL, and
// the survivors' new workers run at the smaller world within TTL + 1 s.
TEST_F(EtcdRendezvousTest, ALostAgentsSurvivorsRestartAtTheSmallerWorldWithinTheLease) {
  ASSERT_NO_FATAL_FAILURE(startThreeAgents());
  const std::string coordinator = coordinators(kAgents).front();
  std::vector<std::string> others;
  for (const std::string& name : kAgents) {
    if (name != coordinator) others.push_back(name);
  }
  const std::string victim = others.front();
  const std::vector<std::string> survivors = {coordinator, others.back()};

  const auto elapsed = killAndTimeTheRestart(victim, survivors);
  std::cout << "[ etcd ] SIGKILL of a non-coordinating agent -> survivors' new workers: "
            << millis(elapsed) << " ms (lease TTL " << kLeaseTtl.count() << " s)" << std::endl;
  RecordProperty("kill_to_restart_ms", std::to_string(millis(elapsed)));
  EXPECT_LE(elapsed, kLeaseTtl + 1s) << logs(kAgents);
  EXPECT_TRUE(contains(log(coordinator), kRevokedALostLease))
      << "the coordinator did not revoke the lost agent's lease itself" << logs(kAgents);
  expectTheSurvivorsFinishAtWorldFour(victim, survivors);
}

// An agent stopped (SIGSTOP) for well under its lease's TTL misses renewals,
// so the coordinator watches its lease closely, but etcd never says the TTL
// passed: nobody revokes it, and the job stays in its first round. (TTL 3 s,
// renewed every second: stopped 1.2 s, the lease goes unrenewed 2.2 s at
// most.)
TEST_F(EtcdRendezvousTest, AnAgentStoppedForLessThanItsTtlIsNeverRevoked) {
  ASSERT_NO_FATAL_FAILURE(startThreeAgents(
      "keep_alive_interval=1,keep_alive_max_attempt=3,last_call_timeout=1,join_timeout=30"));
  const std::string coordinator = coordinators(kAgents).front();
  const std::string victim = coordinator == "c" ? "a" : "c";
  const pid_t agent = test_support::ddprunAgentOf(agentNamed(victim).pid());
  ASSERT_EQ(::kill(agent, SIGSTOP), 0);
  std::this_thread::sleep_for(1200ms);  // the stop itself, not a wait for something
  ASSERT_EQ(::kill(agent, SIGCONT), 0);

  EXPECT_FALSE(test_support::eventually(
      [&] {
        for (const std::string& name : kAgents) {
          if (contains(log(name), kRevokedALostLease) || roundAndWorld(name).first != 0) {
            return true;
          }
        }
        return false;
      },
      4s, 20ms))
      << logs(kAgents);
}

// `kill -9` of a ddprun's pid (its guardian): the agent kills its workers and
// revokes its lease before it exits, so the others re-form at once, not after
// the lease's 15 s.
TEST_F(EtcdRendezvousTest, AKilledDdprunTellsTheOthersAtOnceNotAfterItsLease) {
  ASSERT_NO_FATAL_FAILURE(startThreeAgents(
      "keep_alive_interval=5,keep_alive_max_attempt=3,last_call_timeout=1,join_timeout=30"));
  const std::string coordinator = coordinators(kAgents).front();
  const std::string victim = coordinator == "c" ? "a" : "c";  // not the coordinator
  std::vector<std::string> survivors;
  for (const std::string& name : kAgents) {
    if (name != victim) survivors.push_back(name);
  }
  const auto elapsed = killAndTimeTheRestart(victim, survivors, /*ddprun_pid=*/true);
  std::cout << "[ etcd ] kill -9 of ddprun's pid -> survivors' new workers: " << millis(elapsed)
            << " ms (lease TTL 15 s)" << std::endl;
  EXPECT_LE(elapsed, 3s) << logs(kAgents);
  expectTheSurvivorsFinishAtWorldFour(victim, survivors);
}

// The coordinating agent is SIGKILLed: another agent is elected, says so,
// and re-forms the job without the lost one.
TEST_F(EtcdRendezvousTest, ALostCoordinatorIsReplacedAndTheJobGoesOn) {
  ASSERT_NO_FATAL_FAILURE(startThreeAgents());
  const std::string victim = coordinators(kAgents).front();
  std::vector<std::string> survivors;
  for (const std::string& name : kAgents) {
    if (name != victim) survivors.push_back(name);
  }

  const auto elapsed = killAndTimeTheRestart(victim, survivors);
  std::cout << "[ etcd ] SIGKILL of the coordinating agent -> survivors' new workers: "
            << millis(elapsed) << " ms" << std::endl;
  EXPECT_LE(elapsed, kLeaseTtl + 1s) << logs(kAgents);
  EXPECT_TRUE(contains(log(survivors[0]), kRevokedALostLease) ||
              contains(log(survivors[1]), kRevokedALostLease))
      << "neither watcher revoked the lost coordinator's lease" << logs(kAgents);
  const auto now_coordinating = coordinators(survivors);
  EXPECT_EQ(now_coordinating.size(), 1u) << logs(kAgents);
  expectTheSurvivorsFinishAtWorldFour(victim, survivors);
}

// Two of three members are SIGKILLed for 10 s, far longer than the lease:
// the agents say etcd cannot renew their lease, the workers run on, and once
// the members are back the agents say so and the job finishes.
TEST_F(EtcdRendezvousTest, EtcdWithoutQuorumForTenSecondsCostsTheWorkersNothing) {
  const fs::path go = dir_.path() / "go";
  Subprocess a = fakeAgent("a", "2", {"--after", go.string()});
  Subprocess b = fakeAgent("b", "2", {"--after", go.string()});
  ASSERT_TRUE(test_support::eventually(
      [&] {
        return ready("a") && ready("b") && roundAndWorld("a") == std::pair{0, 4} &&
               roundAndWorld("b") == std::pair{0, 4};
      },
      30s))
      << logs({"a", "b"});
  std::vector<pid_t> pids = workers("a");
  for (const pid_t pid : workers("b")) pids.push_back(pid);

  const int leader = cluster().leader();
  const int other = (leader + 1) % cluster().size();
  cluster().kill(leader);
  cluster().kill(other);
  const auto outage_start = Clock::now();
  for (const std::string name : {"a", "b"}) {
    ASSERT_TRUE(logShows(name, "etcd cannot renew this node's lease", 15s)) << logs({"a", "b"});
  }
  // The outage lasts 10 s by the clock; every worker and agent lives through it.
  bool everyone_ran = true;
  test_support::eventually(
      [&] {
        for (const pid_t pid : pids) everyone_ran &= alive(pid);
        everyone_ran &= !a.tryWait() && !b.tryWait();
        return !everyone_ran || Clock::now() - outage_start >= 10s;
      },
      20s, 50ms);
  ASSERT_TRUE(everyone_ran) << logs({"a", "b"});

  cluster().restart(leader);
  cluster().restart(other);
  for (const std::string name : {"a", "b"}) {
    EXPECT_TRUE(logShows(name, "serves again", 20s)) << logs({"a", "b"});
  }
  for (const pid_t pid : pids) EXPECT_TRUE(alive(pid)) << "worker " << pid << logs({"a", "b"});
  const int round = roundAndWorld("a").first;
  std::cout << "[ etcd ] 2 of 3 members down for 10 s: the workers "
            << (round == 0 ? "never restarted" : "restarted") << std::endl;
  EXPECT_EQ(round, 0) << logs({"a", "b"});
  std::ofstream(go.string()) << "go\n";
  for (Subprocess* agent : {&a, &b}) {
    const auto status = agent->waitFor(30s);
    ASSERT_TRUE(status) << logs({"a", "b"});
    EXPECT_TRUE(status->success()) << status->shellCode() << logs({"a", "b"});
  }
}

TEST_F(EtcdRendezvousTest, AgentsStartedWhileEveryEtcdMemberIsDownFormTheRoundOnceItServes) {
  agentsStartedWhileEtcdIsDownFormTheRound(3);
}

TEST_F(EtcdRendezvousTest, AgentsStartedWithoutAnEtcdQuorumFormTheRoundOnceItIsBack) {
  agentsStartedWhileEtcdIsDownFormTheRound(2);
}

// The coordinator grants the run's lease before the first round and renews
// it every half TTL while it waits for the members. With a TTL of 1 s, half
// of it was once computed in whole seconds: 0, a loop of renewals that kept
// the agent busy (0.67 s of CPU in 2.5 s) and etcd's members more so.
TEST_F(EtcdRendezvousTest, ACoordinatorWaitingForTheMembersWithATtlOfOneSecondIsIdle) {
  Subprocess a =
      fakeAgent("a", "2", {}, "keep_alive_interval=1,keep_alive_max_attempt=1,join_timeout=30");
  ASSERT_TRUE(logShows("a", "coordinating the etcd rendezvous", 15s)) << log("a");
  const pid_t agent = test_support::ddprunAgentOf(a.pid());
  const double start_cpu = test_support::cpuSecondsOf(agent);
  const auto start = Clock::now();
  double used = 0.0;
  test_support::eventually(
      [&] {
        used = test_support::cpuSecondsOf(agent) - start_cpu;
        return used > 0.2 || Clock::now() - start >= 2s;
      },
      10s, 50ms);
  EXPECT_LE(used, 0.2) << "CPU seconds the waiting agent used in 2 s" << log("a");
  ::kill(a.pid(), SIGTERM);
  EXPECT_TRUE(a.waitFor(30s)) << log("a");
}

// A lease lost for good (revoked here by hand, as an expiry during a long
// quorum loss would): the agent says so, takes a new lease and registers
// again; the coordinator counts it lost and back, and the job moves to a new
// round with both nodes, which then finishes.
TEST_F(EtcdRendezvousTest, AnAgentWhoseLeaseWasLostRegistersAgain) {
  Subprocess a = fakeAgent("a", "2", kHangInFirstRound);
  Subprocess b = fakeAgent("b", "2", kHangInFirstRound);
  ASSERT_TRUE(test_support::eventually(
      [&] {
        return roundAndWorld("a") == std::pair{0, 4} && roundAndWorld("b") == std::pair{0, 4};
      },
      30s))
      << logs({"a", "b"});
  const auto members = cluster().etcdctl(
      {"get", "--prefix", "/ddprun/rendezvous/" + run_id_ + "/members/", "-w", "json"});
  ASSERT_TRUE(members.ok()) << members.err;
  const auto kvs = nlohmann::json::parse(members.out).at("kvs");
  ASSERT_EQ(kvs.size(), 2u) << members.out;
  const auto lease = kvs.at(0).at("lease").get<std::int64_t>();
  std::ostringstream hex;
  hex << std::hex << lease;
  ASSERT_TRUE(cluster().etcdctl({"lease", "revoke", hex.str()}).ok());

  EXPECT_TRUE(test_support::eventually(
      [&] { return contains(log("a") + log("b"), "registering again"); }, 10s))
      << logs({"a", "b"});
  ASSERT_TRUE(test_support::eventually(
      [&] { return roundAndWorld("a").first >= 1 && roundAndWorld("b").first >= 1; }, 15s))
      << logs({"a", "b"});
  EXPECT_EQ(roundAndWorld("a").second, 4) << logs({"a", "b"});
  for (Subprocess* agent : {&a, &b}) {
    const auto status = agent->waitFor(30s);
    ASSERT_TRUE(status) << logs({"a", "b"});
    EXPECT_TRUE(status->success()) << status->shellCode() << logs({"a", "b"});
  }
}

// keep_alive_max_attempt=1 makes the lease one keep_alive_interval long: a
// renewal every interval would race the expiry, so the lease is renewed
// three times per TTL, and no agent loses it while the job runs.
TEST_F(EtcdRendezvousTest, ALeaseOfOneIntervalIsNeverLostWhileTheJobRuns) {
  const std::string conf =
      "keep_alive_interval=1,keep_alive_max_attempt=1,last_call_timeout=1,join_timeout=30";
  const fs::path go = dir_.path() / "go";
  Subprocess a = fakeAgent("a", "2", {"--after", go.string()}, conf);
  Subprocess b = fakeAgent("b", "2", {"--after", go.string()}, conf);
  ASSERT_TRUE(test_support::eventually(
      [&] {
        return roundAndWorld("a") == std::pair{0, 4} && roundAndWorld("b") == std::pair{0, 4};
      },
      30s))
      << logs({"a", "b"});
  // Five lease lengths: a lease renewed only at its end is lost in that time.
  EXPECT_FALSE(test_support::eventually(
      [&] { return contains(log("a") + log("b"), "registering again"); }, 5s))
      << logs({"a", "b"});
  std::ofstream(go.string()) << "go\n";
  for (Subprocess* agent : {&a, &b}) {
    const auto status = agent->waitFor(30s);
    ASSERT_TRUE(status) << logs({"a", "b"});
    EXPECT_TRUE(status->success()) << status->shellCode() << logs({"a", "b"});
  }
  EXPECT_EQ(roundAndWorld("a").first, 0) << logs({"a", "b"});
}

// A whole job SIGKILLed leaves nothing in etcd once its leases end: its
// round's state lives on the run's lease, which only its agents renewed. A
// new job with the same run id then starts afresh at round 0, as torchrun's
// etcd rendezvous does once its state's TTL has passed, rather than
// numbering its rounds on from the dead job's.
TEST_F(EtcdRendezvousTest, ANewJobWithAKilledJobsRunIdStartsAtRoundZero) {
  Subprocess old_a = fakeAgent("old-a", "1:2", {"--hang"});
  Subprocess old_b = fakeAgent("old-b", "1:2", {"--hang"});
  ASSERT_TRUE(test_support::eventually(
      [&] {
        return roundAndWorld("old-a") == std::pair{0, 4} &&
               roundAndWorld("old-b") == std::pair{0, 4};
      },
      30s))
      << logs({"old-a", "old-b"});
  killAgent(old_b);  // the job goes on alone: round 1 is in etcd's state
  ASSERT_TRUE(test_support::eventually([&] { return roundAndWorld("old-a").first == 1; }, 10s))
      << logs({"old-a", "old-b"});
  killAgent(old_a);
  for (Subprocess* agent : {&old_a, &old_b}) {
    ASSERT_TRUE(agent->waitFor(10s)) << logs({"old-a", "old-b"});
  }
  const std::string prefix = "/ddprun/rendezvous/" + run_id_ + "/";
  std::string left;
  EXPECT_TRUE(test_support::eventually(
      [&] {
        left = cluster().etcdctl({"get", "--prefix", "--keys-only", prefix}).out;
        return left.find_first_not_of('\n') == std::string::npos;
      },
      kLeaseTtl + 3s))
      << "the killed job's keys outlived its leases:\n"
      << left;
  Subprocess fresh = fakeAgent("new", "1", {});
  const auto status = fresh.waitFor(30s);
  ASSERT_TRUE(status && status->success()) << logs({"new"});
  EXPECT_EQ(roundAndWorld("new"), (std::pair{0, 2})) << logs({"new"});
}

}  // namespace
}  // namespace ddprun::launcher

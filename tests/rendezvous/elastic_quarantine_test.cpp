// Quarantine in the elastic rendezvous state machine, with a hand-driven
// clock: which host a group failure is blamed on, a host left out after
// quarantine_after failures, never below min_nodes, the end of a quarantine,
// and agents of a quarantined host standing by.
#include <gtest/gtest.h>

#include "ddprun/rendezvous/elastic_rendezvous.hpp"

namespace ddprun::rdzv {
namespace {

using namespace std::chrono_literals;
using Clock = ElasticRendezvous::Clock;

const Clock::time_point kStart{};

// Long keep-alive: these tests jump the clock by a quarantine's length, and
// nobody should expire meanwhile for want of a heartbeat.
ElasticSettings settings(int min_nodes, int max_nodes, int quarantine_after) {
  ElasticSettings s;
  s.min_nodes = min_nodes;
  s.max_nodes = max_nodes;
  s.last_call_timeout = 30s;
  s.keep_alive_timeout = 24h;
  s.quarantine_after = quarantine_after;
  s.quarantine_duration = 600s;
  return s;
}

AgentInfo agent(const std::string& id) { return {id, 2, std::nullopt}; }

std::vector<std::string> idsOf(const RoundCompleted& round) {
  std::vector<std::string> ids;
  for (const NodeAssignment& node : round.nodes) {
    ids.push_back(node.id);
  }
  return ids;
}

template <typename Event>
std::vector<Event> eventsOf(const Events& events) {
  std::vector<Event> found;
  for (const RendezvousEvent& event : events) {
    if (const auto* wanted = std::get_if<Event>(&event)) {
      found.push_back(*wanted);
    }
  }
  return found;
}

// Three hosts of one agent each, in round 0 of --nnodes 2:3.
ElasticRendezvous threeHosts(int quarantine_after) {
  ElasticRendezvous rdzv(settings(2, 3, quarantine_after));
  Events events;
  for (const char* id : {"ha:1", "hb:2", "hc:3"}) {
    EXPECT_EQ(rdzv.join(agent(id), kStart, events), JoinStatus::kMember);
  }
  EXPECT_EQ(eventsOf<RoundCompleted>(events).size(), 1u);
  return rdzv;
}

TEST(ElasticQuarantineTest, AFailureIsBlamedOnTheHostThatAskedFirstAndOnlyOnce) {
  ElasticRendezvous rdzv = threeHosts(3);
  const Events first = rdzv.restart("hc:3", kStart + 1s, 0);
  ASSERT_EQ(eventsOf<RoundCompleted>(first).size(), 1u);
  EXPECT_EQ(rdzv.round(), 1);
  EXPECT_EQ(rdzv.blamed("hc"), 1);
  // The others' workers fail in turn (their collectives broke): their
  // restarts name round 0, which is over, and change nothing.
  EXPECT_TRUE(rdzv.restart("ha:1", kStart + 2s, 0).empty());
  EXPECT_TRUE(rdzv.restart("hb:2", kStart + 2s, 0).empty());
  EXPECT_EQ(rdzv.round(), 1) << "one failure re-formed the round twice";
  EXPECT_EQ(rdzv.blamed("ha"), 0);
  EXPECT_EQ(rdzv.blamed("hb"), 0);
  // An older agent names no round: its restart is of the running one.
  EXPECT_EQ(eventsOf<RoundCompleted>(rdzv.restart("hb:2", kStart + 3s)).size(), 1u);
  EXPECT_EQ(rdzv.blamed("hb"), 1);
}

TEST(ElasticQuarantineTest, AHostBlamedQuarantineAfterTimesStandsByAndTheRestGoOn) {
  ElasticRendezvous rdzv = threeHosts(2);
  rdzv.restart("hc:3", kStart + 1s, 0);
  EXPECT_TRUE(rdzv.quarantined(kStart + 1s).empty()) << "after one failure of two";
  const Events events = rdzv.restart("hc:3", kStart + 2s, 1);
  const auto quarantined = eventsOf<HostQuarantined>(events);
  ASSERT_EQ(quarantined.size(), 1u);
  EXPECT_EQ(quarantined[0].host, "hc");
  EXPECT_EQ(quarantined[0].failures, 2);
  EXPECT_EQ(quarantined[0].until, kStart + 2s + 600s);
  EXPECT_EQ(quarantined[0].round, 2);
  EXPECT_EQ(quarantined[0].agents, (std::vector<std::string>{"hc:3"}));
  const auto rounds = eventsOf<RoundCompleted>(events);
  ASSERT_EQ(rounds.size(), 1u);
  EXPECT_EQ(rounds[0].round, 2);
  EXPECT_EQ(idsOf(rounds[0]), (std::vector<std::string>{"ha:1", "hb:2"}));
  EXPECT_EQ(rdzv.spares(), (std::vector<std::string>{"hc:3"}));
  const auto held = rdzv.quarantineOf("hc:3", kStart + 3s);
  ASSERT_TRUE(held.has_value());
  EXPECT_EQ(held->failures, 2);
  EXPECT_EQ(rdzv.quarantined(kStart + 3s).size(), 1u);
  EXPECT_EQ(rdzv.blamed("hc"), 0) << "a quarantine starts the count afresh";
}

// An agent restarted on the same machine has a new id; its host is the same.
TEST(ElasticQuarantineTest, TheBlameFollowsTheHostNotTheAgent) {
  ElasticRendezvous rdzv = threeHosts(2);
  rdzv.restart("hc:3", kStart + 1s, 0);
  rdzv.lose("hc:3", kStart + 2s);  // round 2, without hc
  Events events;
  EXPECT_EQ(rdzv.join(agent("hc:9"), kStart + 3s, events), JoinStatus::kMember);
  EXPECT_EQ(rdzv.round(), 3);
  EXPECT_EQ(eventsOf<HostQuarantined>(rdzv.restart("hc:9", kStart + 4s, 3)).size(), 1u);
  EXPECT_EQ(rdzv.members(), (std::vector<std::string>{"ha:1", "hb:2"}));
}

TEST(ElasticQuarantineTest, AnAgentOfAQuarantinedHostJoinsAsASpare) {
  ElasticRendezvous rdzv = threeHosts(1);
  rdzv.restart("hc:3", kStart + 1s, 0);
  rdzv.lose("hc:3", kStart + 2s);  // a spare: nothing re-forms
  EXPECT_EQ(rdzv.round(), 1);
  Events events;
  EXPECT_EQ(rdzv.join(agent("hc:4"), kStart + 3s, events), JoinStatus::kQuarantined);
  EXPECT_TRUE(events.empty()) << "a quarantined host's agent must restart nobody";
  EXPECT_EQ(rdzv.spares(), (std::vector<std::string>{"hc:4"}));
  const auto held = rdzv.quarantineOf("hc:4", kStart + 3s);
  ASSERT_TRUE(held.has_value());
  EXPECT_EQ(held->host, "hc");
  EXPECT_EQ(held->failures, 1);
  EXPECT_EQ(held->until, kStart + 1s + 600s);
}

TEST(ElasticQuarantineTest, AQuarantineNeverTakesTheRoundBelowMinNodes) {
  ElasticRendezvous rdzv(settings(2, 2, 1));
  Events events;
  rdzv.join(agent("ha:1"), kStart, events);
  rdzv.join(agent("hb:2"), kStart, events);
  events = rdzv.restart("hb:2", kStart + 1s, 0);
  EXPECT_TRUE(eventsOf<HostQuarantined>(events).empty());
  ASSERT_EQ(eventsOf<RoundCompleted>(events).size(), 1u);
  EXPECT_EQ(idsOf(eventsOf<RoundCompleted>(events)[0]), (std::vector<std::string>{"ha:1", "hb:2"}));
  EXPECT_EQ(rdzv.blamed("hb"), 1) << "still blamed: quarantined once the job can spare it";
  // A spare arrives: the next failure of hb can be spared.
  EXPECT_EQ(rdzv.join(agent("hs:3"), kStart + 2s, events), JoinStatus::kSpare);
  events = rdzv.restart("hb:2", kStart + 3s, 1);
  ASSERT_EQ(eventsOf<HostQuarantined>(events).size(), 1u);
  EXPECT_EQ(rdzv.members(), (std::vector<std::string>{"ha:1", "hs:3"}));
}

// "As long as min_nodes still holds": a member lost later brings the
// quarantined host back rather than suspending the job.
TEST(ElasticQuarantineTest, BelowMinNodesTheQuarantinedHostComesBack) {
  ElasticRendezvous rdzv = threeHosts(1);
  rdzv.restart("hc:3", kStart + 1s, 0);
  const Events events = rdzv.lose("ha:1", kStart + 2s);
  const auto rounds = eventsOf<RoundCompleted>(events);
  ASSERT_EQ(rounds.size(), 1u);
  EXPECT_EQ(idsOf(rounds[0]), (std::vector<std::string>{"hb:2", "hc:3"}));
  ASSERT_EQ(eventsOf<QuarantineEnded>(events).size(), 1u);
  EXPECT_EQ(eventsOf<QuarantineEnded>(events)[0].host, "hc");
  EXPECT_TRUE(rdzv.quarantined(kStart + 2s).empty());
}

TEST(ElasticQuarantineTest, AfterQuarantineSecondsTheHostRejoinsAsANewcomer) {
  ElasticRendezvous rdzv = threeHosts(1);
  rdzv.restart("hc:3", kStart + 1s, 0);
  EXPECT_EQ(*rdzv.nextDeadline(), kStart + 601s);
  EXPECT_TRUE(rdzv.tick(kStart + 600s).empty());
  const Events events = rdzv.tick(kStart + 601s);
  const auto rounds = eventsOf<RoundCompleted>(events);
  ASSERT_EQ(rounds.size(), 1u);
  EXPECT_EQ(rounds[0].round, 2);
  EXPECT_EQ(idsOf(rounds[0]), (std::vector<std::string>{"ha:1", "hb:2", "hc:3"}));
  ASSERT_EQ(eventsOf<QuarantineEnded>(events).size(), 1u);
  EXPECT_TRUE(eventsOf<QuarantineEnded>(events)[0].spares.empty());
  EXPECT_FALSE(rdzv.quarantineOf("hc:3", kStart + 601s));
  EXPECT_GT(*rdzv.nextDeadline(), kStart + 601s) << "only the keep-alive expiry is left";
}

// The round filled up meanwhile: the host's agent stays a spare, a plain one.
TEST(ElasticQuarantineTest, AQuarantineEndingWhenTheRoundIsFullLeavesAPlainSpare) {
  ElasticRendezvous rdzv = threeHosts(1);
  rdzv.restart("hc:3", kStart + 1s, 0);
  Events events;
  EXPECT_EQ(rdzv.join(agent("hd:4"), kStart + 2s, events), JoinStatus::kMember);
  events = rdzv.tick(kStart + 601s);
  EXPECT_TRUE(eventsOf<RoundCompleted>(events).empty());
  ASSERT_EQ(eventsOf<QuarantineEnded>(events).size(), 1u);
  EXPECT_EQ(eventsOf<QuarantineEnded>(events)[0].spares, (std::vector<std::string>{"hc:3"}));
  // It takes the next free place as any spare does.
  EXPECT_EQ(idsOf(eventsOf<RoundCompleted>(rdzv.lose("ha:1", kStart + 602s)).at(0)),
            (std::vector<std::string>{"hb:2", "hd:4", "hc:3"}));
}

TEST(ElasticQuarantineTest, QuarantineAfterZeroNeverQuarantines) {
  ElasticRendezvous rdzv = threeHosts(0);
  for (int round = 0; round < 5; ++round) {
    const Events events = rdzv.restart("hc:3", kStart + 1s, round);
    EXPECT_TRUE(eventsOf<HostQuarantined>(events).empty());
  }
  EXPECT_EQ(rdzv.members().size(), 3u);
  EXPECT_EQ(rdzv.blamed("hc"), 5);
}

// An etcd coordinator elected after another rebuilds the machine from the
// state its predecessor wrote: the quarantine holds on, and the host's agent,
// arriving while the round is restored, stands by.
TEST(ElasticQuarantineTest, ARestoredQuarantineKeepsItsHostOutOfTheRestoredRound) {
  ElasticRendezvous rdzv(settings(2, 3, 2));
  rdzv.restoreQuarantine({"hc", 2, kStart + 300s});
  Events events;
  EXPECT_EQ(rdzv.rejoin(agent("ha:1"), {4, 0, 2}, kStart, events), JoinStatus::kMember);
  rdzv.join(agent("hc:3"), kStart, events);  // placed once the round is restored
  EXPECT_EQ(rdzv.rejoin(agent("hb:2"), {4, 1, 2}, kStart, events), JoinStatus::kMember);
  EXPECT_TRUE(events.empty()) << "the round went on as it was";
  EXPECT_EQ(rdzv.members(), (std::vector<std::string>{"ha:1", "hb:2"}));
  EXPECT_EQ(rdzv.spares(), (std::vector<std::string>{"hc:3"}));
  ASSERT_TRUE(rdzv.quarantineOf("hc:3", kStart).has_value());
  EXPECT_EQ(rdzv.quarantineOf("hc:3", kStart)->failures, 2);
  EXPECT_EQ(*rdzv.nextDeadline(), kStart + 300s);
}

}  // namespace
}  // namespace ddprun::rdzv

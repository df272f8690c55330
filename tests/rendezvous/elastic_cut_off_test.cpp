// A rendezvous cut off from its agents, with a hand-driven clock: when it
// heard nobody, their keep-alive running out is its own silence, and it holds
// them instead of losing them; one agent silent while another is heard is
// lost as before.
#include <gtest/gtest.h>

#include "ddprun/rendezvous/elastic_rendezvous.hpp"

namespace ddprun::rdzv {
namespace {

using namespace std::chrono_literals;
using Clock = ElasticRendezvous::Clock;

const Clock::time_point kStart{};

ElasticSettings settings(int min_nodes, int max_nodes) {
  ElasticSettings s;
  s.min_nodes = min_nodes;
  s.max_nodes = max_nodes;
  s.last_call_timeout = 30s;
  s.keep_alive_timeout = 15s;
  s.cut_off_limit = 60s;
  return s;
}

// A complete round of `ids` (as many as max_nodes), round 0.
void formRound(ElasticRendezvous& rdzv, const std::vector<std::string>& ids) {
  Events events;
  for (const std::string& id : ids) {
    ASSERT_EQ(rdzv.join({id, 1, std::nullopt, -1}, kStart, events), JoinStatus::kMember) << id;
  }
  ASSERT_TRUE(rdzv.complete());
}

std::vector<std::string> idsOf(const std::vector<Expired>& expired) {
  std::vector<std::string> ids;
  for (const Expired& agent : expired) {
    ids.push_back(agent.id);
  }
  return ids;
}

// a and b heard at staggered times (5 s and 10 s), then nothing: the
// rendezvous' link is cut at 11 s.
class CutOffTest : public ::testing::Test {
 protected:
  void SetUp() override {
    formRound(rdzv_, {"a", "b"});
    rdzv_.heartbeat("a", kStart + 5s);
    rdzv_.heartbeat("b", kStart + 10s);
  }

  ElasticRendezvous rdzv_{settings(1, 2)};
  std::vector<Expired> expired_;
};

// a's keep-alive runs out at 20 s, when b too was silent for 10 s: the
// rendezvous heard nobody, so it holds both; once they are heard again the
// round stands, with no new round and nobody restarting.
TEST_F(CutOffTest, MembersSilentTogetherAreHeldAndTheRoundStands) {
  EXPECT_TRUE(rdzv_.tick(kStart + 20s, expired_).empty());
  EXPECT_TRUE(expired_.empty()) << idsOf(expired_).front();
  EXPECT_EQ(rdzv_.heldAgents(), 2u);
  ASSERT_TRUE(rdzv_.nextDeadline());
  EXPECT_GT(*rdzv_.nextDeadline(), kStart + 20s) << "a past deadline would spin the timer";

  EXPECT_TRUE(rdzv_.tick(kStart + 40s, expired_).empty());
  rdzv_.heartbeat("b", kStart + 45s);
  rdzv_.heartbeat("a", kStart + 47s);
  EXPECT_TRUE(rdzv_.tick(kStart + 55s, expired_).empty());
  EXPECT_TRUE(expired_.empty());
  EXPECT_EQ(rdzv_.heldAgents(), 0u);
  EXPECT_EQ(rdzv_.round(), 0);
  EXPECT_TRUE(rdzv_.complete());
  EXPECT_EQ(rdzv_.members(), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(*rdzv_.nextDeadline(), kStart + 45s + 15s) << "judged as before";
}

// Nobody heard within cut_off_limit past the keep-alive timeout (as long as
// the agents wait for a silent rendezvous): both are lost, together.
TEST_F(CutOffTest, TheHeldAreLostWhenTheSilenceOutlastsTheLimit) {
  EXPECT_TRUE(rdzv_.tick(kStart + 20s, expired_).empty());
  EXPECT_EQ(rdzv_.nextDeadline(), kStart + 10s + 15s + 60s);
  EXPECT_TRUE(rdzv_.tick(kStart + 84s, expired_).empty());
  EXPECT_TRUE(expired_.empty());

  const Events events = rdzv_.tick(kStart + 85s, expired_);
  EXPECT_EQ(idsOf(expired_), (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(expired_[0].was_member && expired_[1].was_member);
  ASSERT_EQ(events.size(), 1u) << "one new round for both";
  EXPECT_TRUE(std::holds_alternative<RoundSuspended>(events[0]));
  EXPECT_EQ(rdzv_.memberCount(), 0u);
  EXPECT_EQ(rdzv_.heldAgents(), 0u);
}

// One silent while the other is heard is that one's silence: lost at the
// keep-alive timeout, as ever.
TEST_F(CutOffTest, OneSilentWhileAnotherIsHeardIsLostAsBefore) {
  rdzv_.heartbeat("b", kStart + 15s);
  const Events events = rdzv_.tick(kStart + 20s, expired_);
  EXPECT_EQ(idsOf(expired_), (std::vector<std::string>{"a"}));
  ASSERT_EQ(events.size(), 1u);
  ASSERT_TRUE(std::holds_alternative<RoundCompleted>(events[0]));
  EXPECT_EQ(rdzv_.members(), (std::vector<std::string>{"b"}));
  EXPECT_EQ(rdzv_.heldAgents(), 0u);
}

// Once one is heard again (at 40 s, after 30 s of silence), each connection
// may resume up to as long again later (TCP's backoff doubles): the other has
// that and a keep-alive timeout (until 85 s). Heard by then, it stays; still
// silent, it alone is lost.
TEST_F(CutOffTest, AfterOneIsHeardTheOthersHaveAsLongAgain) {
  ASSERT_TRUE(rdzv_.tick(kStart + 20s, expired_).empty());
  for (auto at = kStart + 40s; at < kStart + 85s; at += 5s) {
    rdzv_.heartbeat("a", at);
    EXPECT_TRUE(rdzv_.tick(at, expired_).empty());
  }
  EXPECT_TRUE(expired_.empty());
  EXPECT_EQ(rdzv_.heldAgents(), 1u);
  EXPECT_EQ(rdzv_.nextDeadline(), kStart + 85s);

  rdzv_.heartbeat("a", kStart + 85s);
  const Events events = rdzv_.tick(kStart + 85s, expired_);
  EXPECT_EQ(idsOf(expired_), (std::vector<std::string>{"b"}));
  ASSERT_EQ(events.size(), 1u);
  EXPECT_TRUE(std::holds_alternative<RoundCompleted>(events[0]));
  EXPECT_EQ(rdzv_.members(), (std::vector<std::string>{"a"}));
}

// However long the silence, a connection retransmits within 120 s once the
// link is back (Linux's longest retransmission timeout): a flapping link
// cannot keep a dead agent held for ever longer.
TEST(CutOffLongTest, TheGraceAfterALongSilenceIsAtMostTheLongestRetransmissionWait) {
  ElasticSettings long_limit = settings(1, 2);
  long_limit.cut_off_limit = 600s;
  ElasticRendezvous rdzv(long_limit);
  formRound(rdzv, {"a", "b"});
  rdzv.heartbeat("a", kStart + 5s);
  rdzv.heartbeat("b", kStart + 10s);
  std::vector<Expired> expired;
  ASSERT_TRUE(rdzv.tick(kStart + 20s, expired).empty());
  // a is heard at 310 s, after 300 s of silence, and every 5 s from then.
  for (auto at = kStart + 310s; at < kStart + 445s; at += 5s) {
    rdzv.heartbeat("a", at);
    EXPECT_TRUE(rdzv.tick(at, expired).empty());
  }
  EXPECT_TRUE(expired.empty());
  EXPECT_EQ(rdzv.heldAgents(), 1u);
  rdzv.heartbeat("a", kStart + 445s);
  rdzv.tick(kStart + 445s, expired);
  EXPECT_EQ(idsOf(expired), (std::vector<std::string>{"b"})) << "lost at 310 + 120 + 15 s";
}

TEST_F(CutOffTest, AHeldMemberHeardWithinTheGraceStays) {
  ASSERT_TRUE(rdzv_.tick(kStart + 20s, expired_).empty());
  rdzv_.heartbeat("a", kStart + 40s);
  rdzv_.heartbeat("b", kStart + 80s);
  rdzv_.heartbeat("a", kStart + 80s);
  EXPECT_TRUE(rdzv_.tick(kStart + 85s, expired_).empty());
  EXPECT_TRUE(expired_.empty());
  EXPECT_EQ(rdzv_.round(), 0);
  EXPECT_EQ(rdzv_.heldAgents(), 0u);
}

// A held member whose connection closes is gone at once, as ever.
TEST_F(CutOffTest, AHeldMemberWhoseConnectionClosesIsLostAtOnce) {
  ASSERT_TRUE(rdzv_.tick(kStart + 20s, expired_).empty());
  const Events events = rdzv_.lose("a", kStart + 30s);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_TRUE(std::holds_alternative<RoundCompleted>(events[0]));
  EXPECT_EQ(rdzv_.members(), (std::vector<std::string>{"b"}));
  EXPECT_EQ(rdzv_.heldAgents(), 1u) << "b is still held";
  EXPECT_TRUE(rdzv_.tick(kStart + 40s, expired_).empty());
}

// The rendezvous' own stall during a cut-off counts against nobody either.
TEST_F(CutOffTest, AStallMovesTheHoldsEnd) {
  ASSERT_TRUE(rdzv_.tick(kStart + 20s, expired_).empty());
  rdzv_.excuseStall(10s, kStart + 50s);
  EXPECT_EQ(rdzv_.nextDeadline(), kStart + 95s);
}

// A single-member round fits the same rule: its member silent is the
// rendezvous heard nobody.
TEST(CutOffSingleTest, ALoneMemberSilentIsHeldAndStays) {
  ElasticRendezvous rdzv(settings(1, 1));
  formRound(rdzv, {"a"});
  std::vector<Expired> expired;
  EXPECT_TRUE(rdzv.tick(kStart + 15s, expired).empty());
  EXPECT_TRUE(expired.empty());
  rdzv.heartbeat("a", kStart + 50s);
  EXPECT_TRUE(rdzv.tick(kStart + 60s, expired).empty());
  EXPECT_EQ(rdzv.round(), 0);
  EXPECT_EQ(rdzv.members(), (std::vector<std::string>{"a"}));
}

// A spare heard while the member is silent: the rendezvous is not cut off,
// so the member is lost at the keep-alive timeout and the spare takes its
// place, as before.
TEST(CutOffSingleTest, ASpareHeardMeansTheSilentMemberIsLost) {
  ElasticRendezvous rdzv(settings(1, 1));
  formRound(rdzv, {"a"});
  Events events;
  ASSERT_EQ(rdzv.join({"s", 1, std::nullopt, -1}, kStart, events), JoinStatus::kSpare);
  rdzv.heartbeat("s", kStart + 12s);
  std::vector<Expired> expired;
  events = rdzv.tick(kStart + 15s, expired);
  EXPECT_EQ(idsOf(expired), (std::vector<std::string>{"a"}));
  EXPECT_EQ(rdzv.members(), (std::vector<std::string>{"s"}));
}

// A restart while other members are held: they are still in the round, so
// the failed host's quarantine leaves min_nodes (2) and is applied.
TEST(CutOffQuarantineTest, HeldMembersCountTowardsMinNodesForAQuarantine) {
  ElasticSettings s = settings(2, 3);
  s.quarantine_after = 1;
  ElasticRendezvous rdzv(s);
  formRound(rdzv, {"ha:1", "hb:2", "hc:3"});
  rdzv.heartbeat("ha:1", kStart + 5s);
  rdzv.heartbeat("hb:2", kStart + 6s);
  rdzv.heartbeat("hc:3", kStart + 10s);
  std::vector<Expired> expired;
  ASSERT_TRUE(rdzv.tick(kStart + 20s, expired).empty());
  ASSERT_EQ(rdzv.heldAgents(), 3u);
  rdzv.heartbeat("ha:1", kStart + 40s);  // heard first; hb and hc still held
  const Events events = rdzv.restart("ha:1", kStart + 41s, 0);
  bool quarantined = false;
  for (const RendezvousEvent& event : events) {
    quarantined = quarantined || std::holds_alternative<HostQuarantined>(event);
  }
  EXPECT_TRUE(quarantined) << "hb and hc are members: the round keeps min_nodes without ha";
  EXPECT_EQ(rdzv.members(), (std::vector<std::string>{"hb:2", "hc:3"}));
  EXPECT_EQ(rdzv.spares(), (std::vector<std::string>{"ha:1"}));
}

// A second cut while b is still held from the first: b's connection has been
// silent since 10 s, and TCP's backoff for it doubles from there (a
// retransmission at 61 s falls into the second cut, the next comes at 112 s),
// so once the link heals again (70 s) b has as long again as its own silence
// (60 s), not only as the second cut lasted (20 s), plus the keep-alive timeout.
TEST_F(CutOffTest, ASecondCutKeepsTheFirstSilenceForTheStillHeld) {
  ASSERT_TRUE(rdzv_.tick(kStart + 20s, expired_).empty());
  for (auto at = kStart + 40s; at <= kStart + 50s; at += 5s) {
    rdzv_.heartbeat("a", at);  // the link heals at 40 s; b's connection is still backing off
    EXPECT_TRUE(rdzv_.tick(at, expired_).empty());
  }
  EXPECT_TRUE(rdzv_.tick(kStart + 65s, expired_).empty()) << "cut again from 50 s: a is held";
  EXPECT_EQ(rdzv_.heldAgents(), 2u);
  for (auto at = kStart + 70s; at <= kStart + 110s; at += 5s) {
    rdzv_.heartbeat("a", at);  // healed again at 70 s
    EXPECT_TRUE(rdzv_.tick(at, expired_).empty());
  }
  rdzv_.heartbeat("b", kStart + 112s);
  rdzv_.heartbeat("a", kStart + 115s);
  EXPECT_TRUE(rdzv_.tick(kStart + 115s, expired_).empty());
  EXPECT_TRUE(expired_.empty()) << idsOf(expired_).front() << " lost though alive";
  EXPECT_EQ(rdzv_.heldAgents(), 0u);
  EXPECT_EQ(rdzv_.round(), 0);
  EXPECT_EQ(rdzv_.members(), (std::vector<std::string>{"a", "b"}));
}

// A held spare promoted into a member's place (the member left) proves
// nothing about its link: it keeps the hold's grace (until 85 s), not a fresh
// keep-alive from its promotion that runs out first (at 60 s).
TEST(CutOffSpareTest, AHeldSparePromotedKeepsTheHoldsGrace) {
  ElasticRendezvous rdzv(settings(1, 2));
  formRound(rdzv, {"a", "b"});
  Events events;
  ASSERT_EQ(rdzv.join({"s", 1, std::nullopt, -1}, kStart, events), JoinStatus::kSpare);
  rdzv.heartbeat("a", kStart + 5s);
  rdzv.heartbeat("s", kStart + 8s);
  rdzv.heartbeat("b", kStart + 10s);
  std::vector<Expired> expired;
  ASSERT_TRUE(rdzv.tick(kStart + 20s, expired).empty());
  ASSERT_EQ(rdzv.heldAgents(), 3u);
  rdzv.heartbeat("a", kStart + 40s);  // the link heals: b and s have until 85 s
  events = rdzv.lose("b", kStart + 45s);
  EXPECT_EQ(rdzv.members(), (std::vector<std::string>{"a", "s"}));
  for (auto at = kStart + 45s; at <= kStart + 65s; at += 5s) {
    rdzv.heartbeat("a", at);
    rdzv.tick(at, expired);
  }
  EXPECT_TRUE(expired.empty()) << idsOf(expired).front() << " lost within the hold's grace";
  rdzv.heartbeat("s", kStart + 70s);
  rdzv.heartbeat("a", kStart + 80s);
  rdzv.heartbeat("s", kStart + 80s);
  rdzv.tick(kStart + 85s, expired);
  EXPECT_TRUE(expired.empty());
  EXPECT_EQ(rdzv.members(), (std::vector<std::string>{"a", "s"}));
  EXPECT_EQ(rdzv.heldAgents(), 0u);
}

// Not the cut-off's: a restore that runs to its deadline (a member never
// came back). a rejoined at 0 s and heartbeat every 3 s meanwhile, but the
// heartbeats of agents being restored are ignored (they are not in index_
// until the restore ends), so a is restored with last_seen 0 s, already past
// its keep-alive, and dropped by the very next tick. Disabled: fails on this
// branch and before the change alike; see the review's report.
TEST(RestoreTest, DISABLED_AHeartbeatDuringARestoreCounts) {
  ElasticRendezvous rdzv(settings(1, 3));
  Events events;
  rdzv.rejoin({"a", 1, std::nullopt, -1}, {3, 0, 3}, kStart, events);
  rdzv.rejoin({"b", 1, std::nullopt, -1}, {3, 1, 3}, kStart + 10s, events);
  for (auto at = kStart + 3s; at < kStart + 15s; at += 3s) {
    rdzv.heartbeat("a", at);
    rdzv.heartbeat("b", at);
  }
  std::vector<Expired> expired;
  rdzv.tick(kStart + 15s, expired);  // the restore's deadline: c never came back
  ASSERT_FALSE(rdzv.restoring());
  rdzv.tick(kStart + 15s, expired);  // nextDeadline() is 15 s: a's "expiry"
  EXPECT_TRUE(expired.empty()) << idsOf(expired).front() << " dropped, though heard at 12 s";
  EXPECT_EQ(rdzv.members(), (std::vector<std::string>{"a", "b"}));
}

}  // namespace
}  // namespace ddprun::rdzv

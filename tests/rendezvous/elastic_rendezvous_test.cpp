// The elastic rendezvous state machine with a hand-driven clock: when rounds
// complete, who is in them and in what order, spares, liveness, close.
#include "ddprun/rendezvous/elastic_rendezvous.hpp"

#include <gtest/gtest.h>

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
  return s;
}

AgentInfo agent(const std::string& id, int local_world_size = 2,
                std::optional<int> hint = std::nullopt) {
  return {id, local_world_size, hint};
}

// The ids of a completed round's nodes, in group-rank order.
std::vector<std::string> idsOf(const RoundCompleted& round) {
  std::vector<std::string> ids;
  for (const NodeAssignment& node : round.nodes) {
    ids.push_back(node.id);
  }
  return ids;
}

// The one event of `events`, which must be a completed round.
RoundCompleted onlyCompleted(const Events& events) {
  EXPECT_EQ(events.size(), 1u);
  if (events.size() != 1 || !std::holds_alternative<RoundCompleted>(events[0])) {
    ADD_FAILURE() << "expected exactly one RoundCompleted";
    return {};
  }
  return std::get<RoundCompleted>(events[0]);
}

Events joinAll(ElasticRendezvous& rdzv, const std::vector<AgentInfo>& agents,
               Clock::time_point now = kStart) {
  Events events;
  for (const AgentInfo& info : agents) {
    EXPECT_EQ(rdzv.join(info, now, events), JoinStatus::kMember) << info.id;
  }
  return events;
}

TEST(ElasticRendezvousTest, TheFirstRoundCompletesWhenMaxNodesHaveJoined) {
  ElasticRendezvous rdzv(settings(2, 3));
  Events events;
  rdzv.join(agent("a"), kStart, events);
  rdzv.join(agent("b"), kStart, events);
  EXPECT_TRUE(events.empty()) << "completed before max without a last call";
  rdzv.join(agent("c"), kStart, events);
  const RoundCompleted round = onlyCompleted(events);
  EXPECT_EQ(round.round, 0);
  EXPECT_EQ(idsOf(round), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_TRUE(rdzv.complete());
}

TEST(ElasticRendezvousTest, AtMinNodesTheRoundCompletesAfterTheLastCall) {
  ElasticRendezvous rdzv(settings(2, 4));
  EXPECT_TRUE(joinAll(rdzv, {agent("a"), agent("b")}, kStart).empty());
  ASSERT_TRUE(rdzv.nextDeadline().has_value());
  EXPECT_EQ(*rdzv.nextDeadline(), kStart + 15s) << "keep-alive expiry comes first";
  rdzv.heartbeat("a", kStart + 29s);
  rdzv.heartbeat("b", kStart + 29s);
  EXPECT_EQ(*rdzv.nextDeadline(), kStart + 30s);
  EXPECT_TRUE(rdzv.tick(kStart + 29s).empty());
  const RoundCompleted round = onlyCompleted(rdzv.tick(kStart + 30s));
  EXPECT_EQ(idsOf(round), (std::vector<std::string>{"a", "b"}));
}

// How long each round took to form, for the metrics: the first from its
// first member's arrival, a re-form from the loss that began it.
TEST(ElasticRendezvousTest, ARoundSaysHowLongItTookToForm) {
  ElasticRendezvous rdzv(settings(2, 2));
  Events events;
  rdzv.join(agent("a"), kStart, events);
  rdzv.join(agent("b"), kStart + 3s, events);
  EXPECT_EQ(onlyCompleted(events).formation, 3s);
  // Lost below the minimum: suspended until a replacement comes 7 s later.
  EXPECT_FALSE(std::holds_alternative<RoundCompleted>(rdzv.lose("b", kStart + 10s).at(0)));
  events.clear();
  rdzv.join(agent("c"), kStart + 17s, events);
  EXPECT_EQ(onlyCompleted(events).formation, 7s);
  // A restart re-forms at once.
  EXPECT_EQ(onlyCompleted(rdzv.restart("a", kStart + 20s)).formation, 0s);
}

// Everyone who waited for the first round left: the next arrival starts its
// formation afresh.
TEST(ElasticRendezvousTest, AFormingRoundEveryoneLeftStartsAfreshWithTheNextArrival) {
  ElasticRendezvous rdzv(settings(2, 2));
  Events events;
  rdzv.join(agent("a"), kStart, events);
  rdzv.lose("a", kStart + 50s);
  rdzv.join(agent("b"), kStart + 100s, events);
  rdzv.join(agent("c"), kStart + 101s, events);
  EXPECT_EQ(onlyCompleted(events).formation, 1s);
}

TEST(ElasticRendezvousTest, RanksAreContiguousBlocksPerNode) {
  ElasticRendezvous rdzv(settings(3, 3));
  const RoundCompleted round =
      onlyCompleted(joinAll(rdzv, {agent("a", 2), agent("b", 4), agent("c", 1)}));
  EXPECT_EQ(round.world_size, 7);
  ASSERT_EQ(round.nodes.size(), 3u);
  EXPECT_EQ(round.nodes[0].base_rank, 0);
  EXPECT_EQ(round.nodes[1].base_rank, 2);
  EXPECT_EQ(round.nodes[2].base_rank, 6);
  EXPECT_EQ(round.nodes[2].group_rank, 2);
  EXPECT_EQ(round.nodes[1].local_world_size, 4);
}

TEST(ElasticRendezvousTest, NodeRankHintsOrderTheFirstRound) {
  ElasticRendezvous rdzv(settings(4, 4));
  const RoundCompleted round = onlyCompleted(
      joinAll(rdzv, {agent("c", 2, 2), agent("a", 2, 0), agent("x", 2), agent("b", 2, 1)}));
  EXPECT_EQ(idsOf(round), (std::vector<std::string>{"a", "b", "c", "x"}));
}

TEST(ElasticRendezvousTest, ALostMemberReformsAtOnceAndSurvivorsKeepTheirOrder) {
  ElasticRendezvous rdzv(settings(2, 3));
  joinAll(rdzv, {agent("a"), agent("b"), agent("c")});
  const RoundCompleted round = onlyCompleted(rdzv.lose("b", kStart + 1s));
  EXPECT_EQ(round.round, 1);
  EXPECT_EQ(idsOf(round), (std::vector<std::string>{"a", "c"}));
  EXPECT_EQ(round.world_size, 4);
  EXPECT_EQ(round.nodes[1].base_rank, 2);
}

TEST(ElasticRendezvousTest, BelowMinSurvivorsAreSuspendedUntilAReplacementJoins) {
  ElasticRendezvous rdzv(settings(2, 2));
  joinAll(rdzv, {agent("a"), agent("b")});
  const Events lost = rdzv.lose("a", kStart + 1s);
  ASSERT_EQ(lost.size(), 1u);
  ASSERT_TRUE(std::holds_alternative<RoundSuspended>(lost[0]));
  EXPECT_EQ(std::get<RoundSuspended>(lost[0]).waiting, (std::vector<std::string>{"b"}));
  EXPECT_FALSE(rdzv.complete());

  Events joined;
  EXPECT_EQ(rdzv.join(agent("d"), kStart + 2s, joined), JoinStatus::kMember);
  const RoundCompleted round = onlyCompleted(joined);
  EXPECT_EQ(round.round, 1);
  EXPECT_EQ(idsOf(round), (std::vector<std::string>{"b", "d"}));
}

TEST(ElasticRendezvousTest, ANewcomerBelowMaxMovesEveryoneToANewRound) {
  ElasticRendezvous rdzv(settings(1, 3));
  joinAll(rdzv, {agent("a")});
  rdzv.heartbeat("a", kStart + 29s);
  onlyCompleted(rdzv.tick(kStart + 30s));
  Events events;
  EXPECT_EQ(rdzv.join(agent("b"), kStart + 31s, events), JoinStatus::kMember);
  const RoundCompleted round = onlyCompleted(events);
  EXPECT_EQ(round.round, 1);
  EXPECT_EQ(idsOf(round), (std::vector<std::string>{"a", "b"}));
}

TEST(ElasticRendezvousTest, BeyondMaxAgentsWaitAsSparesAndFillALostPlace) {
  ElasticRendezvous rdzv(settings(2, 2));
  joinAll(rdzv, {agent("a"), agent("b")});
  Events events;
  EXPECT_EQ(rdzv.join(agent("s"), kStart + 1s, events), JoinStatus::kSpare);
  EXPECT_TRUE(events.empty()) << "a spare must not restart anyone";
  EXPECT_EQ(rdzv.spares(), (std::vector<std::string>{"s"}));
  const RoundCompleted round = onlyCompleted(rdzv.lose("a", kStart + 2s));
  EXPECT_EQ(idsOf(round), (std::vector<std::string>{"b", "s"}));
  EXPECT_TRUE(rdzv.spares().empty());
}

TEST(ElasticRendezvousTest, ASilentAgentIsLostAfterTheKeepAliveTimeout) {
  ElasticRendezvous rdzv(settings(1, 2));
  joinAll(rdzv, {agent("a"), agent("b")});
  rdzv.heartbeat("a", kStart + 10s);
  EXPECT_EQ(*rdzv.nextDeadline(), kStart + 15s);
  EXPECT_TRUE(rdzv.tick(kStart + 14s).empty());
  const RoundCompleted round = onlyCompleted(rdzv.tick(kStart + 15s));
  EXPECT_EQ(idsOf(round), (std::vector<std::string>{"a"}));
  EXPECT_EQ(*rdzv.nextDeadline(), kStart + 25s);
}

// A daemon that was stopped for 20 s does not blame the agents for its own
// silence: their heartbeats are still queued on its sockets.
TEST(ElasticRendezvousTest, TheRendezvousOwnStallIsNotTheAgentsSilence) {
  ElasticRendezvous rdzv(settings(1, 2));
  joinAll(rdzv, {agent("a"), agent("b")});
  rdzv.excuseStall(20s, kStart + 25s);
  EXPECT_TRUE(rdzv.tick(kStart + 25s).empty()) << "an agent was dropped for the daemon's stall";
  EXPECT_EQ(*rdzv.nextDeadline(), kStart + 35s);
  rdzv.excuseStall(60s, kStart + 30s);  // never beyond now
  EXPECT_EQ(*rdzv.nextDeadline(), kStart + 45s);
}

TEST(ElasticRendezvousTest, ARestartRequestStartsTheNextRoundInTheSameOrder) {
  ElasticRendezvous rdzv(settings(3, 3));
  joinAll(rdzv, {agent("a"), agent("b"), agent("c")});
  const RoundCompleted round = onlyCompleted(rdzv.restart("b", kStart + 1s));
  EXPECT_EQ(round.round, 1);
  EXPECT_EQ(idsOf(round), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_TRUE(rdzv.restart("stranger", kStart + 2s).empty());
}

TEST(ElasticRendezvousTest, LosingAnAgentWhileTheFirstRoundFormsCancelsTheLastCall) {
  ElasticRendezvous rdzv(settings(2, 3));
  joinAll(rdzv, {agent("a"), agent("b")});
  EXPECT_TRUE(rdzv.lose("b", kStart + 1s).empty());
  rdzv.heartbeat("a", kStart + 29s);
  EXPECT_TRUE(rdzv.tick(kStart + 30s).empty()) << "completed below min_nodes";
  Events events;
  rdzv.join(agent("c"), kStart + 31s, events);
  EXPECT_TRUE(events.empty()) << "the first round still gets its last call";
  rdzv.heartbeat("a", kStart + 60s);
  rdzv.heartbeat("c", kStart + 60s);
  EXPECT_EQ(idsOf(onlyCompleted(rdzv.tick(kStart + 61s))), (std::vector<std::string>{"a", "c"}));
}

TEST(ElasticRendezvousTest, AKnownAgentJoiningAgainIsAHeartbeat) {
  ElasticRendezvous rdzv(settings(2, 2));
  joinAll(rdzv, {agent("a"), agent("b")});
  Events events;
  EXPECT_EQ(rdzv.join(agent("a"), kStart + 10s, events), JoinStatus::kAlreadyKnown);
  EXPECT_TRUE(events.empty());
  EXPECT_EQ(*rdzv.nextDeadline(), kStart + 15s) << "b's expiry";
  rdzv.heartbeat("b", kStart + 10s);
  EXPECT_EQ(*rdzv.nextDeadline(), kStart + 25s);
}

TEST(ElasticRendezvousTest, CloseTellsEveryAgentOnceAndRefusesJoins) {
  ElasticRendezvous rdzv(settings(1, 1));
  joinAll(rdzv, {agent("a")});
  Events events;
  rdzv.join(agent("s"), kStart, events);
  const Events closed = rdzv.close();
  ASSERT_EQ(closed.size(), 1u);
  ASSERT_TRUE(std::holds_alternative<RendezvousClosed>(closed[0]));
  EXPECT_EQ(std::get<RendezvousClosed>(closed[0]).agents, (std::vector<std::string>{"a", "s"}));
  EXPECT_TRUE(rdzv.close().empty());
  EXPECT_EQ(rdzv.join(agent("late"), kStart, events), JoinStatus::kClosed);
  EXPECT_TRUE(rdzv.lose("a", kStart).empty());
  EXPECT_FALSE(rdzv.nextDeadline().has_value());
}

// Round numbers never go below what the joining agents already ran.
TEST(ElasticRendezvousTest, RoundsNumberAfterTheAgentsLastRound) {
  ElasticRendezvous rdzv(settings(2, 2));
  AgentInfo a = agent("a");
  a.last_round = 4;
  const RoundCompleted round = onlyCompleted(joinAll(rdzv, {a, agent("b")}));
  EXPECT_EQ(round.round, 5);
}

// A restarted rendezvous restores the running round once every member is
// back: same round, same order, and no event (nobody restarts).
TEST(ElasticRendezvousTest, ARoundIsRestoredSilentlyWhenEveryMemberRejoins) {
  ElasticRendezvous rdzv(settings(1, 3));
  Events events;
  EXPECT_EQ(rdzv.rejoin(agent("b"), {7, 1, 2}, kStart, events), JoinStatus::kMember);
  EXPECT_EQ(rdzv.restoring(), 7);
  EXPECT_FALSE(rdzv.complete());
  EXPECT_EQ(rdzv.rejoin(agent("a"), {7, 0, 2}, kStart + 1s, events), JoinStatus::kMember);
  EXPECT_TRUE(events.empty());
  EXPECT_FALSE(rdzv.restoring());
  EXPECT_TRUE(rdzv.complete());
  EXPECT_EQ(rdzv.round(), 7);
  EXPECT_EQ(rdzv.members(), (std::vector<std::string>{"a", "b"}));
}

// A member still missing when the keep-alive timeout passes is lost: the
// others move on to a new round at once.
TEST(ElasticRendezvousTest, AMemberMissingFromARestoreIsLostAtTheDeadline) {
  ElasticRendezvous rdzv(settings(1, 3));
  Events events;
  rdzv.rejoin(agent("a"), {3, 0, 2}, kStart, events);
  EXPECT_EQ(rdzv.nextDeadline(), kStart + 15s);
  EXPECT_TRUE(rdzv.tick(kStart + 14s).empty());
  const RoundCompleted round = onlyCompleted(rdzv.tick(kStart + 15s));
  EXPECT_EQ(round.round, 4);
  EXPECT_EQ(idsOf(round), (std::vector<std::string>{"a"}));
}

// A coordinator that took over knows who is alive: ending the restore moves
// the survivors on to a new round at once, not at the deadline; with
// nothing being restored it does nothing.
TEST(ElasticRendezvousTest, EndingARestoreMovesTheSurvivorsOnAtOnce) {
  ElasticRendezvous rdzv(settings(1, 3));
  Events events;
  EXPECT_TRUE(rdzv.endRestore(kStart).empty());
  rdzv.rejoin(agent("b"), {3, 1, 3}, kStart, events);
  rdzv.rejoin(agent("c"), {3, 2, 3}, kStart, events);
  const RoundCompleted round = onlyCompleted(rdzv.endRestore(kStart + 1s));
  EXPECT_EQ(round.round, 4);
  EXPECT_EQ(idsOf(round), (std::vector<std::string>{"b", "c"}));
  EXPECT_FALSE(rdzv.restoring());
  EXPECT_TRUE(rdzv.endRestore(kStart + 2s).empty());
}

// A plain join while a round is restored waits for the restore, then joins
// as a newcomer (everyone moves to a new round with it).
TEST(ElasticRendezvousTest, ANewcomerDuringARestoreJoinsAfterIt) {
  ElasticRendezvous rdzv(settings(1, 3));
  Events events;
  rdzv.rejoin(agent("a"), {2, 0, 2}, kStart, events);
  EXPECT_EQ(rdzv.join(agent("c"), kStart, events), JoinStatus::kMember);
  EXPECT_TRUE(events.empty());
  rdzv.rejoin(agent("b"), {2, 1, 2}, kStart, events);
  const RoundCompleted round = onlyCompleted(events);
  EXPECT_EQ(round.round, 3);
  EXPECT_EQ(idsOf(round), (std::vector<std::string>{"a", "b", "c"}));
}

// A rejoin to a rendezvous that kept its state (it never restarted) is a
// plain join; an agent lost while its round is restored is not waited for.
TEST(ElasticRendezvousTest, ARejoinToALiveRendezvousIsAJoin) {
  ElasticRendezvous rdzv(settings(2, 2));
  joinAll(rdzv, {agent("a"), agent("b")});
  Events events;
  EXPECT_EQ(rdzv.rejoin(agent("a"), {0, 0, 2}, kStart, events), JoinStatus::kAlreadyKnown);
  ElasticRendezvous restarted(settings(1, 2));
  restarted.rejoin(agent("a"), {5, 0, 2}, kStart, events);
  restarted.rejoin(agent("b"), {5, 1, 2}, kStart, events);
  EXPECT_FALSE(restarted.restoring());
  ElasticRendezvous losing(settings(1, 2));
  losing.rejoin(agent("a"), {5, 0, 2}, kStart, events);
  EXPECT_TRUE(losing.lose("a", kStart).empty());
  EXPECT_TRUE(losing.tick(kStart + 15s).empty()) << "a lost agent was restored";
}

// Expiry follows the last time each agent was heard from, whatever the
// order it joined in: a heartbeat moves an agent to the back.
TEST(ElasticRendezvousTest, HeartbeatsReorderExpiry) {
  ElasticRendezvous rdzv(settings(1, 3));
  joinAll(rdzv, {agent("a"), agent("b")}, kStart);
  Events events;
  rdzv.join(agent("c"), kStart + 1s, events);
  rdzv.heartbeat("a", kStart + 5s);
  EXPECT_EQ(*rdzv.nextDeadline(), kStart + 15s) << "b, heard from first, expires first";
  rdzv.heartbeat("b", kStart + 6s);
  EXPECT_EQ(*rdzv.nextDeadline(), kStart + 16s) << "then c";
  rdzv.heartbeat("b", kStart + 14s);  // heard: the rendezvous is not cut off
  std::vector<Expired> expired;
  rdzv.tick(kStart + 20s, expired);
  ASSERT_EQ(expired.size(), 2u);
  EXPECT_EQ(expired[0].id, "c");
  EXPECT_EQ(expired[1].id, "a");
  EXPECT_EQ(rdzv.members(), (std::vector<std::string>{"b"}));
  EXPECT_EQ(*rdzv.nextDeadline(), kStart + 29s);
}

// Silent agents are lost in the order they were last heard from, and each is
// reported with whether it was a member. A spare heard from before a member
// goes first, so the member's loss does not promote a spare that is silent
// too: one new round, without it.
TEST(ElasticRendezvousTest, TickExpiresInLastHeardOrderAndSaysWhoWasAMember) {
  ElasticRendezvous rdzv(settings(1, 2));
  joinAll(rdzv, {agent("a"), agent("b")}, kStart);
  Events events;
  EXPECT_EQ(rdzv.join(agent("s"), kStart + 1s, events), JoinStatus::kSpare);
  rdzv.heartbeat("b", kStart + 2s);
  rdzv.heartbeat("a", kStart + 10s);
  std::vector<Expired> expired;
  const RoundCompleted round = onlyCompleted(rdzv.tick(kStart + 17s, expired));
  ASSERT_EQ(expired.size(), 2u);
  EXPECT_EQ(expired[0].id, "s");
  EXPECT_FALSE(expired[0].was_member);
  EXPECT_EQ(expired[1].id, "b");
  EXPECT_TRUE(expired[1].was_member);
  EXPECT_EQ(round.round, 1);
  EXPECT_EQ(idsOf(round), (std::vector<std::string>{"a"}));
  EXPECT_TRUE(rdzv.spares().empty());
}

// The rendezvous' own stall moves every agent by the same amount, capped at
// now: they expire in the order they were heard from before it.
TEST(ElasticRendezvousTest, AStallExcusedKeepsTheExpiryOrder) {
  ElasticRendezvous rdzv(settings(1, 3));
  joinAll(rdzv, {agent("a"), agent("b"), agent("c")}, kStart);
  Events events;
  ASSERT_EQ(rdzv.join(agent("d"), kStart + 3s, events), JoinStatus::kSpare);
  rdzv.heartbeat("a", kStart + 3s);
  rdzv.heartbeat("c", kStart + 1s);
  rdzv.heartbeat("b", kStart + 2s);  // heard from: c, b, a
  rdzv.excuseStall(20s, kStart + 22s);
  EXPECT_EQ(*rdzv.nextDeadline(), kStart + 36s) << "c, moved by 20 s";
  rdzv.excuseStall(60s, kStart + 40s);  // every one capped at now: a tie
  rdzv.heartbeat("d", kStart + 50s);    // heard: the rendezvous is not cut off
  std::vector<Expired> expired;
  rdzv.tick(kStart + 55s, expired);
  ASSERT_EQ(expired.size(), 3u);
  EXPECT_EQ(expired[0].id, "c");
  EXPECT_EQ(expired[1].id, "b");
  EXPECT_EQ(expired[2].id, "a");
}

// Spares fill free places in the order they arrived, whoever was heard from
// last; a promoted spare's keep-alive starts afresh with its promotion.
TEST(ElasticRendezvousTest, SparesArePromotedInArrivalOrder) {
  ElasticRendezvous rdzv(settings(2, 2));
  joinAll(rdzv, {agent("a"), agent("b")}, kStart);
  Events events;
  for (const char* spare : {"s1", "s2", "s3"}) {
    EXPECT_EQ(rdzv.join(agent(spare), kStart + 1s, events), JoinStatus::kSpare);
  }
  rdzv.heartbeat("s1", kStart + 4s);
  rdzv.heartbeat("s2", kStart + 3s);
  EXPECT_EQ(idsOf(onlyCompleted(rdzv.lose("a", kStart + 5s))),
            (std::vector<std::string>{"b", "s1"}));
  EXPECT_EQ(idsOf(onlyCompleted(rdzv.lose("b", kStart + 6s))),
            (std::vector<std::string>{"s1", "s2"}));
  EXPECT_EQ(rdzv.spares(), (std::vector<std::string>{"s3"}));
  EXPECT_EQ(rdzv.lastSeen("s2"), kStart + 6s);
  EXPECT_EQ(*rdzv.nextDeadline(), kStart + 16s) << "s3, heard from at its join";
  rdzv.heartbeat("s2", kStart + 19s);  // heard: the rendezvous is not cut off
  std::vector<Expired> expired;
  rdzv.tick(kStart + 20s, expired);  // s1 was promoted at 5 s, s2 at 6 s
  ASSERT_EQ(expired.size(), 2u);
  EXPECT_EQ(expired[0].id, "s3");
  EXPECT_EQ(expired[1].id, "s1");
}

// A restored round's agents expire by when they came back, members and
// newcomers alike, not by their group ranks.
TEST(ElasticRendezvousTest, ARestoredRoundExpiresInTheOrderItsAgentsCameBack) {
  ElasticRendezvous rdzv(settings(1, 3));
  Events events;
  rdzv.rejoin(agent("b"), {4, 1, 2}, kStart, events);
  rdzv.join(agent("c"), kStart + 1s, events);
  rdzv.rejoin(agent("a"), {4, 0, 2}, kStart + 2s, events);
  ASSERT_EQ(idsOf(onlyCompleted(events)), (std::vector<std::string>{"a", "b", "c"}));
  rdzv.heartbeat("a", kStart + 14s);  // heard: the rendezvous is not cut off
  std::vector<Expired> expired;
  rdzv.tick(kStart + 15s, expired);
  ASSERT_EQ(expired.size(), 1u);
  EXPECT_EQ(expired[0].id, "b");
  EXPECT_EQ(*rdzv.nextDeadline(), kStart + 16s) << "c";
}

// A restore nobody of its round came back to: the agents that arrived
// meanwhile start afresh, placed as joins are, so beyond max_nodes they
// stand by as spares instead of making the round bigger than allowed.
TEST(ElasticRendezvousTest, ARestoreNobodyCameBackToStillHoldsMaxNodes) {
  ElasticRendezvous rdzv(settings(1, 2));
  Events events;
  rdzv.rejoin(agent("a"), {5, 0, 2}, kStart, events);
  for (const char* id : {"c", "d", "e"}) {
    rdzv.join(agent(id), kStart + 1s, events);
  }
  EXPECT_TRUE(rdzv.lose("a", kStart + 2s).empty());
  events = rdzv.tick(kStart + 15s);
  EXPECT_EQ(rdzv.members(), (std::vector<std::string>{"c", "d"}));
  EXPECT_EQ(rdzv.spares(), (std::vector<std::string>{"e"}));
  const RoundCompleted round = onlyCompleted(events);
  EXPECT_EQ(idsOf(round), (std::vector<std::string>{"c", "d"}));
  EXPECT_EQ(round.round, 6);
}

// Agents that fall silent in the same tick are lost together: a silent spare
// is never promoted into the round its silent peer's loss re-forms, and two
// lost members cost one new round, not two.
TEST(ElasticRendezvousTest, AgentsExpiringInOneTickCostOneRound) {
  ElasticRendezvous rdzv(settings(1, 3));
  joinAll(rdzv, {agent("a"), agent("b"), agent("c")});
  Events events;
  EXPECT_EQ(rdzv.join(agent("s"), kStart, events), JoinStatus::kSpare);
  rdzv.heartbeat("a", kStart + 10s);
  std::vector<Expired> expired;
  events = rdzv.tick(kStart + 15s, expired);
  EXPECT_EQ(expired.size(), 3u);
  const RoundCompleted round = onlyCompleted(events);
  EXPECT_EQ(round.round, 1);
  EXPECT_EQ(idsOf(round), (std::vector<std::string>{"a"}));
  EXPECT_TRUE(rdzv.spares().empty());
}

// The rendezvous' own stall is not the agents' time either: a last call and
// a restore's wait are moved by it as the agents' silence is, never beyond
// a whole timeout from now.
TEST(ElasticRendezvousTest, TheRendezvousOwnStallMovesTheLastCallAndARestore) {
  ElasticRendezvous rdzv(settings(2, 3));
  joinAll(rdzv, {agent("a"), agent("b")});  // the last call ends at kStart + 30s
  rdzv.excuseStall(20s, kStart + 25s);
  EXPECT_TRUE(rdzv.tick(kStart + 31s).empty());
  rdzv.heartbeat("a", kStart + 40s);
  rdzv.heartbeat("b", kStart + 40s);
  EXPECT_FALSE(rdzv.complete());
  EXPECT_EQ(onlyCompleted(rdzv.tick(kStart + 50s)).round, 0);

  ElasticRendezvous restarted(settings(1, 3));
  Events events;
  restarted.rejoin(agent("a"), {3, 0, 2}, kStart, events);  // waits until kStart + 15s
  restarted.excuseStall(10s, kStart + 12s);
  EXPECT_TRUE(restarted.tick(kStart + 16s).empty());
  EXPECT_EQ(restarted.restoring(), 3);
  EXPECT_EQ(restarted.nextDeadline(), kStart + 25s);
  EXPECT_EQ(onlyCompleted(restarted.tick(kStart + 25s)).round, 4);
}

}  // namespace
}  // namespace ddprun::rdzv

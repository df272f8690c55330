// The rendezvous protocol's contract: one key scheme for every reserved key,
// verbs and events that survive a round trip, and malformed joins or events
// named rather than half-read.
#include "ddprun/proto/rendezvous_protocol.hpp"

#include <gtest/gtest.h>

#include <string>

#include "ddprun/proto/errors.hpp"

namespace ddprun::proto::rendezvous {
namespace {

TEST(RendezvousKeys, EveryReservedKeyIsDdprunScopeRunRest) {
  EXPECT_EQ(key(Scope::kElastic, "job", "join"), "ddprun/rdzv/job/join");
  EXPECT_EQ(key(Scope::kStatic, "none", "node/1"), "ddprun/static/none/node/1");
  EXPECT_EQ(verbKey("job", Verb::kAbort), "ddprun/rdzv/job/abort");
  EXPECT_EQ(eventKey("job", "h:42", 3, 7), "ddprun/rdzv/job/events/h:42/3/7");
  EXPECT_TRUE(isElasticKey("ddprun/rdzv/job/join"));
  EXPECT_FALSE(isElasticKey(key(Scope::kStatic, "job", "node/0")));
  EXPECT_FALSE(isElasticKey("/ddprun/rdzv/job/join"));
}

TEST(RendezvousKeys, ElasticKeysSplitIntoRunAndVerb) {
  const auto join = parseElasticKey("ddprun/rdzv/job7/join");
  ASSERT_TRUE(join);
  EXPECT_EQ(join->run_id, "job7");
  EXPECT_EQ(join->verb, Verb::kJoin);
  const auto unknown = parseElasticKey("ddprun/rdzv/job7/explode");
  ASSERT_TRUE(unknown);
  EXPECT_EQ(unknown->verb_text, "explode");
  EXPECT_FALSE(unknown->verb);
  EXPECT_FALSE(parseElasticKey("ddprun/rdzv//join"));
  EXPECT_FALSE(parseElasticKey("ddprun/rdzv/job7"));
  EXPECT_FALSE(parseElasticKey("ddprun/rdzv/" + std::string(257, 'r') + "/join"));
  EXPECT_TRUE(parseElasticKey("ddprun/rdzv/" + std::string(256, 'r') + "/join"));
}

TEST(RendezvousJoin, RoundTripsWithAndWithoutANodeRank) {
  JoinRequest join;
  join.agent = "node3:4242";
  join.local_world_size = 8;
  join.min_nodes = 2;
  join.max_nodes = 4;
  join.last_call_timeout = std::chrono::milliseconds(1500);
  join.keep_alive_timeout = std::chrono::milliseconds(15000);
  join.store_host = "10.0.0.3";
  join.store_port = 40123;
  std::string why;
  EXPECT_EQ(decodeJoin(encodeJoin(join), why), join) << why;
  join.node_rank = 3;
  EXPECT_EQ(decodeJoin(encodeJoin(join), why), join) << why;
  join.session = 2;
  join.last_round = 6;
  join.rejoin = Rejoin{6, 1, 3, true};
  EXPECT_EQ(decodeJoin(encodeJoin(join), why), join) << why;
  join.max_restarts = 3;
  join.restarts_used = 2;
  EXPECT_EQ(decodeJoin(encodeJoin(join), why), join) << why;
  join.quarantine_after = 0;
  join.quarantine_duration = std::chrono::milliseconds(90'000);
  EXPECT_EQ(decodeJoin(encodeJoin(join), why), join) << why;
}

// An older agent says nothing of quarantine (the rendezvous' defaults
// apply); a newer one's settings are checked as the timeouts are.
TEST(RendezvousJoin, QuarantineSettingsAreOptionalAndChecked) {
  std::string why;
  JoinRequest join;
  join.agent = "a:1";
  join.store_host = "h";
  join.store_port = 1;
  const auto old_join = decodeJoin(encodeJoin(join), why);
  ASSERT_TRUE(old_join) << why;
  EXPECT_FALSE(old_join->quarantine_after);
  EXPECT_FALSE(old_join->quarantine_duration);
  join.quarantine_after = -1;
  EXPECT_FALSE(decodeJoin(encodeJoin(join), why));
  join.quarantine_after = 2;
  join.quarantine_duration = std::chrono::milliseconds(0);
  EXPECT_FALSE(decodeJoin(encodeJoin(join), why));
  EXPECT_NE(why.find("quarantine_ms 0"), std::string::npos) << why;
  join.quarantine_duration = std::chrono::milliseconds(1'000'000'000'001);
  EXPECT_FALSE(decodeJoin(encodeJoin(join), why)) << "beyond what the daemon's clock can add";
}

// An older agent's join has no restart counts; an older rendezvous reads
// only the fields it knows, so the new ones change nothing for it.
TEST(RendezvousJoin, RestartCountsAreOptional) {
  std::string why;
  const auto old_join = decodeJoin(R"({"agent":"a:1","local_world_size":1,"min_nodes":1,
      "max_nodes":1,"last_call_timeout_ms":0,"keep_alive_timeout_ms":1,"store_host":"h",
      "store_port":1,"session":0,"last_round":-1})",
                                   why);
  ASSERT_TRUE(old_join) << why;
  EXPECT_FALSE(old_join->max_restarts);
  EXPECT_EQ(old_join->restarts_used, 0);
  JoinRequest join = *old_join;
  join.restarts_used = -1;
  EXPECT_FALSE(decodeJoin(encodeJoin(join), why));
  join.restarts_used = 0;
  join.agent = "{node";
  EXPECT_FALSE(decodeJoin(encodeJoin(join), why)) << "an id a report could be mistaken for";
}

TEST(RendezvousReports, RoundTripAndPlainValuesAreTheAgentAlone) {
  std::string why;
  AgentReport report{"node1:77", 2,
                     WorkerFailureReport{3, 5, 1, 4242, 3, std::nullopt, "exited with code 3"}};
  EXPECT_EQ(decodeVerbValue(encodeAgentReport(report), why), report) << why;
  report.failure->exit_code.reset();
  report.failure->signal = 9;
  EXPECT_EQ(decodeVerbValue(encodeAgentReport(report), why), report) << why;
  const AgentReport bare{"node1:77", std::nullopt, std::nullopt};
  EXPECT_EQ(decodeVerbValue(encodeAgentReport(bare), why), bare) << why;
  EXPECT_EQ(decodeVerbValue("node1:77", why), bare) << "an older agent's value";
  EXPECT_FALSE(decodeVerbValue("{not json", why));
  EXPECT_NE(why.find("a bad rendezvous report"), std::string::npos) << why;
  EXPECT_FALSE(decodeVerbValue(R"({"agent":"a:1","failure":{"round":0}})", why));
}

// An ack says which session's events were read, and up to where; an older
// rendezvous' round, without `acks`, offers none.
TEST(RendezvousAcks, RoundTripAndMalformedAcksAreNamed) {
  std::string why;
  const EventAck ack{"node1:77", 2, 5};
  EXPECT_EQ(decodeEventAck(encodeEventAck(ack), why), ack) << why;
  EXPECT_EQ(verbName(Verb::kAck), "ack");
  for (const char* bad :
       {"node1:77", "{not json", R"({"agent":"a","session":0})",
        R"({"agent":"a","session":-1,"read":0})", R"({"agent":"a","session":0,"read":"1"})"}) {
    why.clear();
    EXPECT_FALSE(decodeEventAck(bad, why)) << bad;
    EXPECT_NE(why.find("a bad rendezvous ack"), std::string::npos) << why;
  }
  const Event older =
      decodeEvent(R"({"type":"round","round":0,"group_rank":0,"group_world_size":1,"base_rank":0,)"
                  R"("local_world_size":1,"world_size":1,"store_host":"h","store_port":1,)"
                  R"("rendezvous_host":"","reports":true})");
  EXPECT_FALSE(older.acks);
}

TEST(RendezvousJoin, MalformedJoinsAreNamed) {
  std::string why;
  EXPECT_FALSE(decodeJoin("{not json", why));
  EXPECT_NE(why.find("a bad rendezvous join"), std::string::npos) << why;
  JoinRequest join;
  join.agent = "a";
  EXPECT_FALSE(decodeJoin(encodeJoin(join), why)) << "no workers' store";
  join.store_host = "h";
  join.store_port = 1;
  join.agent = "a/b";
  EXPECT_FALSE(decodeJoin(encodeJoin(join), why));
  join.agent = "a";
  join.min_nodes = 3;
  join.max_nodes = 2;
  EXPECT_FALSE(decodeJoin(encodeJoin(join), why));
  join.max_nodes = 3;
  join.keep_alive_timeout = std::chrono::milliseconds(0);
  EXPECT_FALSE(decodeJoin(encodeJoin(join), why));
  join.keep_alive_timeout = std::chrono::milliseconds(-1);
  EXPECT_FALSE(decodeJoin(encodeJoin(join), why));
  // Past what the daemon's clock can add to a time point (nanoseconds):
  // accepted, it would wrap and drop the agent at once.
  join.keep_alive_timeout = std::chrono::milliseconds(10'000'000'000'000);
  EXPECT_FALSE(decodeJoin(encodeJoin(join), why)) << "a keep-alive of 317 years";
  const std::chrono::milliseconds billion_seconds(1'000'000'000'000);  // the launcher's bound
  join.keep_alive_timeout = billion_seconds;
  EXPECT_TRUE(decodeJoin(encodeJoin(join), why)) << why;
  join.last_call_timeout = billion_seconds + std::chrono::milliseconds(1);
  EXPECT_FALSE(decodeJoin(encodeJoin(join), why)) << "a last call beyond the bound";
  EXPECT_NE(why.find("a bad rendezvous join"), std::string::npos) << why;
  join.last_call_timeout = std::chrono::milliseconds(0);
  join.keep_alive_timeout = std::chrono::milliseconds(1);
  join.rejoin = Rejoin{2, 3, 3, false};
  EXPECT_FALSE(decodeJoin(encodeJoin(join), why)) << "group rank 3 of 3";
  join.rejoin.reset();
  join.session = -1;
  EXPECT_FALSE(decodeJoin(encodeJoin(join), why));
  EXPECT_FALSE(decodeJoin(R"({"agent":"a","local_world_size":1,"min_nodes":1,"max_nodes":1,
      "last_call_timeout_ms":0,"keep_alive_timeout_ms":1,"store_host":"h","session":0,
      "last_round":-1})",
                          why))
      << "a join without the store's port";
}

// A join or a report is the peer's bytes: nesting past the bound is refused
// as it is read, and the reason says so.
TEST(RendezvousJoin, NestingPastTheBoundIsRefusedSayingSo) {
  const std::string deep = std::string(100'000, '[') + std::string(100'000, ']');
  std::string why;
  EXPECT_FALSE(decodeJoin(R"({"agent":"a:1","x":)" + deep + "}", why));
  EXPECT_EQ(why, "a bad rendezvous join: nested deeper than 64 levels");
  EXPECT_FALSE(decodeVerbValue(R"({"agent":"a:1","x":)" + deep + "}", why));
  EXPECT_EQ(why, "a bad rendezvous report: nested deeper than 64 levels");
}

TEST(RendezvousEvents, EveryTypeRoundTrips) {
  Event round;
  round.type = EventType::kRound;
  round.round = 4;
  round.group_rank = 1;
  round.group_world_size = 3;
  round.base_rank = 8;
  round.local_world_size = 8;
  round.world_size = 24;
  round.store_host = "::1";
  round.store_port = 29999;
  round.rendezvous_host = "node0:123";
  EXPECT_EQ(decodeEvent(encodeEvent(round)), round);
  round.reports = true;
  EXPECT_EQ(decodeEvent(encodeEvent(round)), round);
  round.acks = true;
  EXPECT_EQ(decodeEvent(encodeEvent(round)), round);
  EXPECT_NE(encodeEvent(round).find(R"("acks":true)"), std::string::npos);
  Event closed;
  closed.type = EventType::kClosed;
  closed.failed_on = "node2:77";
  EXPECT_EQ(decodeEvent(encodeEvent(closed)), closed);
  Event error;
  error.type = EventType::kError;
  error.message = "wrong --nnodes";
  EXPECT_EQ(decodeEvent(encodeEvent(error)), error);
  for (EventType type : {EventType::kSuspended, EventType::kFinished}) {
    Event event;
    event.type = type;
    event.round = 2;
    EXPECT_EQ(decodeEvent(encodeEvent(event)), event) << eventTypeName(type);
  }
  for (EventType type : {EventType::kSpare, EventType::kDropped, EventType::kLeft}) {
    Event event;
    event.type = type;
    EXPECT_EQ(decodeEvent(encodeEvent(event)), event) << eventTypeName(type);
  }
  Event quarantined;
  quarantined.type = EventType::kSpare;
  quarantined.round = 5;
  quarantined.quarantine = HostQuarantine{"node2", 3, 599'000};
  EXPECT_EQ(decodeEvent(encodeEvent(quarantined)), quarantined);
}

TEST(RendezvousEvents, MalformedEventsThrowNamingThem) {
  EXPECT_THROW(decodeEvent("{}"), StoreError);
  EXPECT_THROW(decodeEvent(R"({"type":"party"})"), StoreError);
  EXPECT_THROW(decodeEvent(R"({"type":"round","round":1})"), StoreError);
  try {
    decodeEvent("garbage");
    FAIL();
  } catch (const StoreError& error) {
    EXPECT_NE(std::string(error.what()).find("garbage"), std::string::npos) << error.what();
  }
}

// The proof is HMAC-SHA256 as RFC 2104 defines it, so agents and daemons of
// other versions agree with this one whatever library computes it. The
// values come from Python's hmac module; the long token is hashed first.
TEST(RendezvousProof, IsHmacSha256OfTheJoinUnderTheToken) {
  EXPECT_EQ(joinProof("sekrit-token", "run7", "host-a:42", 3, "00112233445566778899aabbccddeeff"),
            "93ce0cb02743430a386d7290a472752d0f91cfa29dd69e270f2f9950ff402ff2");
  EXPECT_EQ(joinProof("", "r", "a", 0, "n"),
            "3355e1e3b07a6c523b727dba4426428a0d2eec9eeaa12f1d9aa93b7c95b4ca66");
  EXPECT_EQ(joinProof(std::string(100, 'k'), "r", "a", 0, "n"),
            "33933d4ae2f8d9446a83b66d5108a72fe6aae2dc4d1cb8e30eef3606460dfb13");
}

TEST(RendezvousProof, SameProofComparesWholeProofs) {
  const std::string proof = joinProof("t", "r", "a", 0, newNonce());
  EXPECT_TRUE(sameProof(proof, proof));
  EXPECT_FALSE(sameProof(proof, proof.substr(0, proof.size() - 1)));
  std::string changed = proof;
  changed.back() = changed.back() == '0' ? '1' : '0';
  EXPECT_FALSE(sameProof(proof, changed));
  EXPECT_FALSE(sameProof("", proof));
  EXPECT_TRUE(sameProof("", ""));
  EXPECT_EQ(newNonce().size(), 32u);
  EXPECT_NE(newNonce(), newNonce());
}

}  // namespace
}  // namespace ddprun::proto::rendezvous

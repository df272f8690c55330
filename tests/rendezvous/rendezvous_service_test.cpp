// Elastic rendezvous through a real ddprund server on loopback, spoken by
// StoreClients over the reserved keys: ranks agreed on, a dropped connection
// or a silent agent noticed and pushed to the survivors, bad requests closing
// only their own connection.
#include "ddprun/rendezvous/rendezvous_service.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <optional>
#include <thread>
#include <vector>

#include "ddprun/proto/errors.hpp"
#include "ddprun/proto/rendezvous_protocol.hpp"
#include "ddprun/rendezvous/client.hpp"
#include "ddprun/rendezvous/server.hpp"
#include "test_agent.hpp"

namespace ddprun::rdzv {
namespace {

using namespace std::chrono_literals;

namespace protocol = proto::rendezvous;
using protocol::Event;
using protocol::EventType;
using testing::JoinSpec;
using testing::TestAgent;

constexpr const char* kToken = "the job's own secret";

// A stranger's join of job7 naming `agent` as `session`, with `auth` for a
// proof: what its connection is told (nothing: it was closed).
std::optional<Event> strangersJoin(std::uint16_t port, const std::string& agent, int64_t session,
                                   const std::string& auth = "") {
  protocol::JoinRequest request;
  request.agent = agent;
  request.session = session;
  request.min_nodes = 2;
  request.max_nodes = 2;
  request.store_host = "mallory";
  request.store_port = 1;
  request.auth = auth;
  StoreClient mallory("127.0.0.1", port, 10s);
  const std::string join_key = protocol::verbKey("job7", protocol::Verb::kJoin);
  mallory.set(join_key, protocol::encodeJoin(request));
  try {
    return protocol::decodeEvent(mallory.query(join_key));
  } catch (const NetworkError&) {
    return std::nullopt;
  }
}

class RendezvousServiceTest : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override { server_ = testing::startLoopbackServer(GetParam()); }

  TestAgent agent(const std::string& id, const std::string& run = "job7") {
    return TestAgent(server_->port(), run, id);
  }

  std::unique_ptr<Server> server_;
};

TEST_P(RendezvousServiceTest, AgentsAgreeOnContiguousRanks) {
  TestAgent a = agent("a");
  TestAgent b = agent("b");
  a.join({2, 2, 2});
  b.join({2, 2, 3});
  const Event round_a = a.nextEvent();
  const Event round_b = b.nextEvent();
  EXPECT_EQ(round_a.type, EventType::kRound);
  EXPECT_EQ(round_a.round, 0);
  EXPECT_EQ(round_a.group_rank, 0);
  EXPECT_EQ(round_b.group_rank, 1);
  EXPECT_EQ(round_b.base_rank, 2);
  EXPECT_EQ(round_a.world_size, 5);
  EXPECT_EQ(round_b.group_world_size, 2);
}

// The keep-alive timeout is a minute and the wait 10 s: only the dropped
// connection itself can have told the survivor.
TEST_P(RendezvousServiceTest, ADroppedConnectionIsPushedToTheSurvivors) {
  TestAgent a = agent("a");
  TestAgent b = agent("b");
  a.join({1, 2});
  b.join({1, 2});
  EXPECT_EQ(a.nextEvent().group_world_size, 2);
  b.disconnect();
  const Event next = a.nextEvent();
  EXPECT_EQ(next.type, EventType::kRound);
  EXPECT_EQ(next.round, 1);
  EXPECT_EQ(next.group_world_size, 1);
  EXPECT_EQ(next.world_size, 2);
}

TEST_P(RendezvousServiceTest, ASilentAgentIsLostAfterTheKeepAliveTimeout) {
  TestAgent a = agent("a");
  TestAgent b = agent("b");
  a.join({1, 2, 2, 30'000, 300});
  b.join({1, 2, 2, 30'000, 300});
  EXPECT_EQ(a.nextEvent().round, 0);
  std::atomic<bool> done{false};
  std::thread heartbeats([&] {  // a stays alive, b falls silent
    while (!done) {
      a.send(protocol::Verb::kHeartbeat);
      std::this_thread::sleep_for(50ms);  // a heartbeat period, not a wait for a result
    }
  });
  const Event next = a.nextEvent();
  done = true;
  heartbeats.join();
  EXPECT_EQ(next.round, 1);
  EXPECT_EQ(next.group_world_size, 1);
  EXPECT_EQ(b.nextEvent().round, 0);
  EXPECT_EQ(b.nextEvent().type, EventType::kDropped) << "a dropped agent must be told";
}

TEST_P(RendezvousServiceTest, BeyondMaxAnAgentIsASpareUntilAPlaceFrees) {
  TestAgent a = agent("a");
  TestAgent b = agent("b");
  TestAgent spare = agent("s");
  a.join({2, 2});
  b.join({2, 2});
  spare.join({2, 2});
  EXPECT_EQ(spare.nextEvent().type, EventType::kSpare);
  a.disconnect();  // before a (node 0 of round 0) said its store was ready
  EXPECT_EQ(b.nextEvent().round, 1) << "round 0 was over before b could be told it";
  const Event round = spare.nextEvent();
  EXPECT_EQ(round.type, EventType::kRound);
  EXPECT_EQ(round.group_rank, 1);
}

TEST_P(RendezvousServiceTest, CloseReachesEveryAgentAndLaterJoins) {
  TestAgent a = agent("a");
  TestAgent b = agent("b");
  a.join({2, 2});
  b.join({2, 2});
  a.nextEvent();
  b.nextEvent();
  a.send(protocol::Verb::kClose);
  EXPECT_EQ(a.nextEvent().type, EventType::kClosed);
  EXPECT_EQ(b.nextEvent().type, EventType::kClosed);
  TestAgent late = agent("late");
  late.join({2, 2});
  EXPECT_EQ(late.nextEvent().type, EventType::kClosed);
}

TEST_P(RendezvousServiceTest, RunsAreIndependentAndMismatchedNodeCountsAreNamed) {
  TestAgent a = agent("a", "job1");
  TestAgent other = agent("a", "job2");
  a.join({1, 1});
  other.join({1, 1});
  EXPECT_EQ(a.nextEvent().group_world_size, 1);
  EXPECT_EQ(other.nextEvent().group_world_size, 1);
  TestAgent wrong = agent("w", "job1");
  wrong.join({2, 3});
  const Event error = wrong.nextEvent();
  EXPECT_EQ(error.type, EventType::kError);
  EXPECT_NE(error.message.find("--nnodes=1:1"), std::string::npos) << error.message;
}

TEST_P(RendezvousServiceTest, AMalformedRequestClosesOnlyItsConnection) {
  StoreClient bad("127.0.0.1", server_->port(), 10s);
  bad.set(protocol::verbKey("job7", protocol::Verb::kJoin), "{not json");
  EXPECT_THROW(bad.ping(), Error);
  TestAgent good = agent("a");
  good.join({1, 1});
  EXPECT_EQ(good.nextEvent().type, EventType::kRound);
}

// The other members learn a round only once its node 0 has emptied its
// workers' store (store_ready), so no new worker sees the last round's keys.
TEST_P(RendezvousServiceTest, OthersLearnTheRoundOnlyOnceNodeZerosStoreIsReady) {
  TestAgent a = agent("a");
  TestAgent b = agent("b");
  a.join({2, 2});
  b.join({2, 2});
  StoreClient reader("127.0.0.1", server_->port(), 10s);
  const Event round_a =
      protocol::decodeEvent(reader.get(protocol::eventKey("job7", "a", 0, 0)));  // no store_ready
  EXPECT_EQ(round_a.group_rank, 0);
  EXPECT_FALSE(b.eventWithin(200ms)) << "b learned the round before node 0's store was ready";
  a.send(protocol::Verb::kStoreReady);
  EXPECT_EQ(b.nextEvent().group_rank, 1);
}

// A keep-alive the daemon cannot keep (none at all, or past what its clock
// can add) is a bad join: only that connection is closed. Accepted, it would
// drop the agent the moment it joined.
TEST_P(RendezvousServiceTest, AJoinWithAnImpossibleKeepAliveClosesOnlyItsConnection) {
  for (const int64_t keep_alive_ms : {int64_t{0}, int64_t{-1}, int64_t{10'000'000'000'000}}) {
    TestAgent bad = agent("bad");
    JoinSpec spec;
    spec.keep_alive_ms = keep_alive_ms;
    EXPECT_THROW(bad.join(spec), Error) << "keep_alive_timeout_ms " << keep_alive_ms;
  }
  TestAgent good = agent("a");
  good.join({1, 1});
  EXPECT_EQ(good.nextEvent().type, EventType::kRound);
}

// The round event carries everything an agent needs, node 0's workers' store
// included: no agent reads it anywhere else. After node 0 is lost, the next
// round names the new node 0's store.
TEST_P(RendezvousServiceTest, ARoundEventCarriesNodeZerosWorkersStore) {
  TestAgent a = agent("a");
  TestAgent b = agent("b");
  a.join({1, 2}, 1111);
  b.join({1, 2}, 2222);
  const Event round_a = a.nextEvent();
  const Event round_b = b.nextEvent();
  ASSERT_EQ(round_a.type, EventType::kRound);
  EXPECT_EQ(round_a.store_host, "store-a");
  EXPECT_EQ(round_a.store_port, 1111);
  EXPECT_EQ(round_b.store_host, "store-a");
  EXPECT_EQ(round_b.store_port, 1111);
  a.disconnect();
  const Event next = b.nextEvent();
  EXPECT_EQ(next.round, 1);
  EXPECT_EQ(next.group_rank, 0);
  EXPECT_EQ(next.store_host, "store-b");
  EXPECT_EQ(next.store_port, 2222);
}

TEST_P(RendezvousServiceTest, AnUnknownVerbClosesOnlyItsConnection) {
  TestAgent good = agent("a");
  good.join({1, 1});
  StoreClient bad("127.0.0.1", server_->port(), 10s);
  bad.set(protocol::key(protocol::Scope::kElastic, "job7", "explode"), "a");
  EXPECT_THROW(bad.ping(), Error);
  EXPECT_EQ(good.nextEvent().type, EventType::kRound);
}

// Only the connection that joined as an agent speaks for it: another client
// sending its abort is refused (closed), and the job goes on.
TEST_P(RendezvousServiceTest, AVerbFromAnotherConnectionIsRefused) {
  TestAgent a = agent("a");
  a.join({1, 1});
  EXPECT_EQ(a.nextEvent().type, EventType::kRound);
  for (const auto verb : {protocol::Verb::kAbort, protocol::Verb::kClose, protocol::Verb::kRestart,
                          protocol::Verb::kLeave, protocol::Verb::kDone}) {
    StoreClient mallory("127.0.0.1", server_->port(), 10s);
    mallory.set(protocol::verbKey("job7", verb), "a");
    EXPECT_THROW(mallory.ping(), Error) << protocol::verbName(verb);
  }
  TestAgent impostor = agent("a");
  EXPECT_THROW(impostor.join({1, 1}), Error) << "a's id on another connection: refused";
  EXPECT_FALSE(a.eventWithin(200ms)) << "a forged request reached agent a";
}

// No command but the rendezvous' own SETs may write a reserved key: a forged
// event, added or appended, closes the forger's connection.
TEST_P(RendezvousServiceTest, NoPlainCommandWritesAReservedKey) {
  TestAgent a = agent("a");
  a.join({1, 1});
  EXPECT_EQ(a.nextEvent().type, EventType::kRound);
  const std::string next_event = protocol::eventKey("job7", "a", 0, 1);
  StoreClient mallory("127.0.0.1", server_->port(), 10s);
  EXPECT_THROW(mallory.add(next_event, 1), Error);
  StoreClient mallory2("127.0.0.1", server_->port(), 10s);
  EXPECT_THROW(mallory2.compareSet(next_event, "", R"({"type":"closed"})"), Error);
  StoreClient mallory3("127.0.0.1", server_->port(), 10s);
  mallory3.append(next_event, "x");
  EXPECT_THROW(mallory3.ping(), Error);
  EXPECT_FALSE(a.eventWithin(200ms));
}

// A restarted rendezvous (a fresh server here) restores the running round
// from its members' rejoins: no round event, so no worker restarts; the exit
// barrier then completes there.
// With a token, a stranger who names a live agent (ids are in the job's
// status) is refused on its own connection before anything is written: the
// agent, waiting for its first round, hears nothing of it.
TEST_P(RendezvousServiceTest, AStrangersJoinNamingALiveAgentNeverReachesIt) {
  const auto server = testing::startLoopbackServer(GetParam(), kToken);
  TestAgent a(server->port(), "job7", "a", kToken);
  a.join({2, 2});
  for (const std::string& auth : {std::string(), std::string(64, '0')}) {
    for (int64_t session = 0; session < 3; ++session) {
      EXPECT_FALSE(strangersJoin(server->port(), "a", session, auth))
          << "a stranger joined as a live agent";
    }
  }
  EXPECT_FALSE(a.eventWithin(300ms)) << "a stranger's join reached agent a";
  TestAgent b(server->port(), "job7", "b", kToken);
  b.join({2, 2});
  EXPECT_EQ(a.nextEvent().type, EventType::kRound);
  EXPECT_EQ(b.nextEvent().type, EventType::kRound);
}

// Joins planted for agents not started yet (ids are host:pid, predictable),
// for their first session and later ones: each stranger is told why on its
// own connection, and the agents join as if nothing had been sent.
TEST_P(RendezvousServiceTest, JoinsPlantedForAgentsNotStartedYetNeverReachThem) {
  const auto server = testing::startLoopbackServer(GetParam(), kToken);
  std::vector<std::optional<Event>> told;
  for (int64_t session = 0; session < 3; ++session) {
    told.push_back(strangersJoin(server->port(), "c", session));
  }
  // c waits for a second node, as an agent does that starts first.
  TestAgent c(server->port(), "job7", "c", kToken);
  c.join({2, 2});
  EXPECT_FALSE(c.eventWithin(300ms)) << "a planted join reached agent c";
  TestAgent d(server->port(), "job7", "d", kToken);
  d.join({2, 2});
  EXPECT_EQ(c.nextEvent().type, EventType::kRound);
  // Both go; c comes back first, in its session 2, and waits again.
  c.disconnect();
  d.disconnect();
  TestAgent again(server->port(), "job7", "c", kToken);
  again.join({2, 2}, 1, 2, std::nullopt, 0);
  EXPECT_FALSE(again.eventWithin(300ms)) << "a join planted for c's session 2 reached it";
  TestAgent d_again(server->port(), "job7", "d", kToken);
  d_again.join({2, 2}, 1, 1, std::nullopt, 0);
  EXPECT_EQ(again.nextEvent().type, EventType::kRound);
  for (const std::optional<Event>& answer : told) {
    ASSERT_TRUE(answer) << "a refused stranger was not told why";
    EXPECT_EQ(answer->type, EventType::kError);
    EXPECT_NE(answer->message.find("requires the job's token"), std::string::npos)
        << answer->message;
  }
}

// Nothing a stranger sends is stored under an agent's keys: a challenge
// naming an agent, and joins naming one, leave no key at all; a nonce is
// the asking connection's alone.
TEST_P(RendezvousServiceTest, NothingAStrangerSendsIsStoredUnderAnAgentsKeys) {
  const auto server = testing::startLoopbackServer(GetParam(), kToken);
  TestAgent a(server->port(), "job7", "a", kToken);
  a.join({2, 2});
  StoreClient mallory("127.0.0.1", server->port(), 10s);
  mallory.set(protocol::verbKey("job7", protocol::Verb::kChallenge),
              protocol::challengeRequest("a", 1));
  for (int64_t session = 0; session < 3; ++session) {
    strangersJoin(server->port(), "d", session);
  }
  StoreClient observer("127.0.0.1", server->port(), 10s);
  EXPECT_EQ(observer.query(protocol::challengeKey("job7", "a", 1)), "");
  for (const std::string& key : observer.listKeys()) {
    EXPECT_FALSE(key.starts_with("ddprun/rdzv/job7/challenges/")) << key;
    EXPECT_FALSE(key.starts_with("ddprun/rdzv/job7/events/d/")) << key;
  }
  EXPECT_NE(mallory.query(protocol::challengeKey("job7", "a", 1)), "");  // its own, answered
}

TEST_P(RendezvousServiceTest, ARestartedRendezvousRestoresTheRoundFromRejoins) {
  TestAgent a = agent("a");
  TestAgent b = agent("b");
  a.join({2, 2});
  b.join({2, 2});
  EXPECT_EQ(a.nextEvent().round, 0);
  EXPECT_EQ(b.nextEvent().round, 0);
  a.send(protocol::Verb::kRestart);  // round 1: a round number other than 0
  EXPECT_EQ(a.nextEvent().round, 1);
  EXPECT_EQ(b.nextEvent().round, 1);
  SetUp();  // the restarted daemon: empty
  TestAgent a2 = agent("a");
  TestAgent b2 = agent("b");
  a2.join({2, 2}, 1, 1, protocol::Rejoin{1, 0, 2, true}, 1);
  b2.join({2, 2}, 1, 1, protocol::Rejoin{1, 1, 2, false}, 1);
  EXPECT_FALSE(a2.eventWithin(200ms)) << "the restored round was pushed again";
  b2.send(protocol::Verb::kDone);
  const Event finished = a2.nextEvent();
  EXPECT_EQ(finished.type, EventType::kFinished);
  EXPECT_EQ(finished.round, 1);
  EXPECT_EQ(b2.nextEvent().type, EventType::kFinished);
}

// A member that never comes back is lost once the keep-alive timeout passes:
// the others move on to a new round without it.
TEST_P(RendezvousServiceTest, AMemberMissingFromARestoreIsLost) {
  TestAgent a = agent("a");
  a.join({1, 2, 2, 30'000, 300}, 1, 1, protocol::Rejoin{4, 1, 2, false}, 4);
  const Event next = a.nextEvent();
  EXPECT_EQ(next.type, EventType::kRound);
  EXPECT_EQ(next.round, 5);
  EXPECT_EQ(next.group_world_size, 1);
}

// Round numbers continue after what the agents already ran.
TEST_P(RendezvousServiceTest, RoundsNumberAfterTheAgentsLastRound) {
  TestAgent a = agent("a");
  a.join({1, 1}, 1, 0, std::nullopt, 6);
  EXPECT_EQ(a.nextEvent().round, 7);
}

INSTANTIATE_TEST_SUITE_P(Threads, RendezvousServiceTest, ::testing::Values(1, 2));

}  // namespace
}  // namespace ddprun::rdzv

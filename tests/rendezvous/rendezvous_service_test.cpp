// Elastic rendezvous through a real ddprund server on loopback, spoken by
// StoreClients over the reserved keys: ranks agreed on, a dropped connection
// or a silent agent noticed and pushed to the survivors, bad requests closing
// only their own connection.
#include "ddprun/rendezvous/rendezvous_service.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "ddprun/proto/errors.hpp"
#include "ddprun/proto/rendezvous_protocol.hpp"
#include "ddprun/rendezvous/client.hpp"
#include "ddprun/rendezvous/server.hpp"

namespace ddprun::rdzv {
namespace {

using namespace std::chrono_literals;

namespace protocol = proto::rendezvous;
using protocol::Event;
using protocol::EventType;

struct JoinSpec {
  int min_nodes = 1;
  int max_nodes = 1;
  int local_world_size = 2;
  int64_t last_call_ms = 30'000;
  int64_t keep_alive_ms = 60'000;
};

// One agent: its own connection (its lease) and its event cursor. Agent "x"
// announces the workers' store "store-x:<its join count>".
class TestAgent {
 public:
  TestAgent(std::uint16_t port, std::string run, std::string id)
      : port_(port),
        run_(std::move(run)),
        id_(std::move(id)),
        client_(std::make_unique<StoreClient>("127.0.0.1", port, 10s)) {}

  void join(const JoinSpec& spec, std::uint16_t store_port = 1) {
    protocol::JoinRequest request;
    request.agent = id_;
    request.local_world_size = spec.local_world_size;
    request.min_nodes = spec.min_nodes;
    request.max_nodes = spec.max_nodes;
    request.last_call_timeout = std::chrono::milliseconds(spec.last_call_ms);
    request.keep_alive_timeout = std::chrono::milliseconds(spec.keep_alive_ms);
    request.store_host = "store-" + id_;
    request.store_port = store_port;
    client_->set(protocol::verbKey(run_, protocol::Verb::kJoin), protocol::encodeJoin(request));
    // A SET has no reply; the ping's echo means the daemon has handled it,
    // so agents joining one after another join in that order.
    client_->ping();
  }

  void send(protocol::Verb verb) { client_->set(protocol::verbKey(run_, verb), id_); }

  // Blocks until the daemon pushes the next event (a GET waits for the key).
  Event nextEvent() {
    StoreClient reader("127.0.0.1", port_, 10s);
    return protocol::decodeEvent(reader.get(protocol::eventKey(run_, id_, next_++)));
  }

  void disconnect() { client_.reset(); }
  const std::string& id() const { return id_; }

 private:
  std::uint16_t port_;
  std::string run_;
  std::string id_;
  std::unique_ptr<StoreClient> client_;
  int64_t next_ = 0;
};

class RendezvousServiceTest : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    ServerOptions options;
    options.host = "127.0.0.1";
    options.port = 0;
    options.threads = GetParam();
    server_ = std::make_unique<Server>(options);
    server_->start();
  }

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
    TestAgent beat = agent("a");
    while (!done) {
      beat.send(protocol::Verb::kHeartbeat);
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
  a.disconnect();
  const Event round = spare.nextEvent();
  EXPECT_EQ(round.type, EventType::kRound);
  EXPECT_EQ(round.group_rank, 1);
  EXPECT_EQ(b.nextEvent().round, 0);
  EXPECT_EQ(b.nextEvent().round, 1);
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

INSTANTIATE_TEST_SUITE_P(Threads, RendezvousServiceTest, ::testing::Values(1, 2));

}  // namespace
}  // namespace ddprun::rdzv

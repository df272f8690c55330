// Elastic rendezvous through a real ddprund server on loopback, spoken by
// StoreClients over the reserved keys: ranks agreed on, a dropped connection
// or a silent agent noticed and pushed to the survivors, bad requests closing
// only their own connection.
#include "ddprun/rendezvous/rendezvous_service.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <nlohmann/json.hpp>
#include <thread>

#include "ddprun/proto/errors.hpp"
#include "ddprun/rendezvous/client.hpp"
#include "ddprun/rendezvous/server.hpp"

namespace ddprun::rdzv {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

struct JoinSpec {
  int min_nodes = 1;
  int max_nodes = 1;
  int local_world_size = 2;
  int64_t last_call_ms = 30'000;
  int64_t keep_alive_ms = 60'000;
};

// One agent: its own connection (its lease) and its event cursor.
class TestAgent {
 public:
  TestAgent(std::uint16_t port, std::string run, std::string id)
      : port_(port),
        run_(std::move(run)),
        id_(std::move(id)),
        client_(std::make_unique<StoreClient>("127.0.0.1", port, 10s)) {}

  void join(const JoinSpec& spec) {
    client_->set(std::string(RendezvousService::kPrefix) + run_ + "/join",
                 json{{"agent", id_},
                      {"local_world_size", spec.local_world_size},
                      {"min_nodes", spec.min_nodes},
                      {"max_nodes", spec.max_nodes},
                      {"last_call_timeout_ms", spec.last_call_ms},
                      {"keep_alive_timeout_ms", spec.keep_alive_ms}}
                     .dump());
    // A SET has no reply; the ping's echo means the daemon has handled it,
    // so agents joining one after another join in that order.
    client_->ping();
  }

  void send(const std::string& verb) {
    client_->set(std::string(RendezvousService::kPrefix) + run_ + "/" + verb, id_);
  }

  // Blocks until the daemon pushes the next event (a GET waits for the key).
  json nextEvent() {
    StoreClient reader("127.0.0.1", port_, 10s);
    return json::parse(reader.get(RendezvousService::eventKey(run_, id_, next_++)));
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
  const json round_a = a.nextEvent();
  const json round_b = b.nextEvent();
  EXPECT_EQ(round_a["type"], "round");
  EXPECT_EQ(round_a["round"], 0);
  EXPECT_EQ(round_a["group_rank"], 0);
  EXPECT_EQ(round_b["group_rank"], 1);
  EXPECT_EQ(round_b["base_rank"], 2);
  EXPECT_EQ(round_a["world_size"], 5);
  EXPECT_EQ(round_b["group_world_size"], 2);
}

// The keep-alive timeout is a minute and the wait 10 s: only the dropped
// connection itself can have told the survivor.
TEST_P(RendezvousServiceTest, ADroppedConnectionIsPushedToTheSurvivors) {
  TestAgent a = agent("a");
  TestAgent b = agent("b");
  a.join({1, 2});
  b.join({1, 2});
  EXPECT_EQ(a.nextEvent()["group_world_size"], 2);
  b.disconnect();
  const json next = a.nextEvent();
  EXPECT_EQ(next["type"], "round");
  EXPECT_EQ(next["round"], 1);
  EXPECT_EQ(next["group_world_size"], 1);
  EXPECT_EQ(next["world_size"], 2);
}

TEST_P(RendezvousServiceTest, ASilentAgentIsLostAfterTheKeepAliveTimeout) {
  TestAgent a = agent("a");
  TestAgent b = agent("b");
  a.join({1, 2, 2, 30'000, 300});
  b.join({1, 2, 2, 30'000, 300});
  EXPECT_EQ(a.nextEvent()["round"], 0);
  std::atomic<bool> done{false};
  std::thread heartbeats([&] {  // a stays alive, b falls silent
    TestAgent beat = agent("a");
    while (!done) {
      beat.send("heartbeat");
      std::this_thread::sleep_for(50ms);  // a heartbeat period, not a wait for a result
    }
  });
  const json next = a.nextEvent();
  done = true;
  heartbeats.join();
  EXPECT_EQ(next["round"], 1);
  EXPECT_EQ(next["group_world_size"], 1);
  EXPECT_EQ(b.nextEvent()["round"], 0);
  EXPECT_EQ(b.nextEvent()["type"], "dropped") << "a dropped agent must be told";
}

TEST_P(RendezvousServiceTest, BeyondMaxAnAgentIsASpareUntilAPlaceFrees) {
  TestAgent a = agent("a");
  TestAgent b = agent("b");
  TestAgent spare = agent("s");
  a.join({2, 2});
  b.join({2, 2});
  spare.join({2, 2});
  EXPECT_EQ(spare.nextEvent()["type"], "spare");
  a.disconnect();
  const json round = spare.nextEvent();
  EXPECT_EQ(round["type"], "round");
  EXPECT_EQ(round["group_rank"], 1);
  EXPECT_EQ(b.nextEvent()["round"], 0);
  EXPECT_EQ(b.nextEvent()["round"], 1);
}

TEST_P(RendezvousServiceTest, CloseReachesEveryAgentAndLaterJoins) {
  TestAgent a = agent("a");
  TestAgent b = agent("b");
  a.join({2, 2});
  b.join({2, 2});
  a.nextEvent();
  b.nextEvent();
  a.send("close");
  EXPECT_EQ(a.nextEvent()["type"], "closed");
  EXPECT_EQ(b.nextEvent()["type"], "closed");
  TestAgent late = agent("late");
  late.join({2, 2});
  EXPECT_EQ(late.nextEvent()["type"], "closed");
}

TEST_P(RendezvousServiceTest, RunsAreIndependentAndMismatchedNodeCountsAreNamed) {
  TestAgent a = agent("a", "job1");
  TestAgent other = agent("a", "job2");
  a.join({1, 1});
  other.join({1, 1});
  EXPECT_EQ(a.nextEvent()["group_world_size"], 1);
  EXPECT_EQ(other.nextEvent()["group_world_size"], 1);
  TestAgent wrong = agent("w", "job1");
  wrong.join({2, 3});
  const json error = wrong.nextEvent();
  EXPECT_EQ(error["type"], "error");
  EXPECT_NE(error["message"].get<std::string>().find("--nnodes=1:1"), std::string::npos)
      << error.dump();
}

TEST_P(RendezvousServiceTest, AMalformedRequestClosesOnlyItsConnection) {
  StoreClient bad("127.0.0.1", server_->port(), 10s);
  bad.set(std::string(RendezvousService::kPrefix) + "job7/join", "{not json");
  EXPECT_THROW(bad.ping(), Error);
  TestAgent good = agent("a");
  good.join({1, 1});
  EXPECT_EQ(good.nextEvent()["type"], "round");
}

INSTANTIATE_TEST_SUITE_P(Threads, RendezvousServiceTest, ::testing::Values(1, 2));

}  // namespace
}  // namespace ddprun::rdzv

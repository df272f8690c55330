// The exit barrier across a cut of the rendezvous' own link, socket-free
// with a hand-driven clock: every member's keep-alive runs out while the
// rendezvous hears nobody, and their `done` comes after the cut. Nobody is
// told `dropped`, and every member is told `finished`.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ddprun/metrics/exposition.hpp"
#include "ddprun/proto/rendezvous_protocol.hpp"
#include "ddprun/proto/tcpstore_codec.hpp"
#include "ddprun/proto/tcpstore_wire.hpp"
#include "ddprun/rendezvous/rendezvous_service.hpp"
#include "ddprun/test_support/prometheus.hpp"

namespace ddprun::rdzv {
namespace {

using namespace std::chrono_literals;
namespace protocol = proto::rendezvous;
using Clock = RendezvousService::Clock;
using protocol::EventType;
using protocol::Verb;

class NoClients : public ClientSink {
 public:
  void deliver(ClientId, std::string_view) override {}
};

class CutOffServiceTest : public ::testing::Test {
 protected:
  // Agent `id` joins the two-node run on connection `client`.
  void join(ClientId client, const std::string& id) {
    protocol::JoinRequest request;
    request.agent = id;
    request.min_nodes = 2;
    request.max_nodes = 2;
    request.keep_alive_timeout = 15s;
    request.store_host = "store-" + id;
    request.store_port = 1;
    ASSERT_FALSE(service_.onSet(client, protocol::verbKey("job7", Verb::kJoin),
                                protocol::encodeJoin(request), start_, keys_));
  }

  void send(ClientId client, Verb verb, const std::string& agent, Clock::duration at) {
    ASSERT_FALSE(
        service_.onSet(client, protocol::verbKey("job7", verb), agent, start_ + at, keys_));
  }

  // The types of the events `agent` was told, in order.
  std::vector<EventType> told(const std::string& agent) {
    std::vector<EventType> types;
    for (std::int64_t n = 0;; ++n) {
      std::string reply;
      EXPECT_FALSE(keys_.execute(
          99, proto::Dialect::Modern,
          proto::makeRequest(proto::Command::Get, {protocol::eventKey("job7", agent, 0, n)}),
          reply));
      std::string empty;
      proto::WireWriter(empty).bytes("");
      if (reply.size() <= empty.size()) {
        return types;
      }
      types.push_back(protocol::decodeEvent(reply.substr(empty.size())).type);
    }
  }

  void tick(Clock::duration at) { service_.tick(start_ + at, keys_); }

  // ddprund_agents_held for job7 in a scrape now; -1 if absent.
  double heldGauge() const {
    metrics::Exposition out;
    service_.collectMetrics(out);
    return test_support::seriesValue(out.text(), "ddprund_agents_held{run_id=\"job7\"}")
        .value_or(-1);
  }

  const Clock::time_point start_{};
  NoClients sink_;
  KeySpace keys_{sink_};
  RendezvousService service_{RendezvousService::Options{}};
};

// a reported done before the cut, b after it: a's keep-alive ran out at
// 20 s and b's at 25 s while the rendezvous heard neither.
TEST_F(CutOffServiceTest, TheExitBarrierFinishesAcrossACutOfTheRendezvousLink) {
  join(1, "a");
  join(2, "b");
  send(1, Verb::kStoreReady, "a", 0s);  // b is told the round
  send(1, Verb::kDone, "a", 1s);
  send(1, Verb::kHeartbeat, "a", 5s);
  send(2, Verb::kHeartbeat, "b", 10s);
  for (auto at = 11s; at <= 50s; at += 1s) {
    tick(at);
  }
  EXPECT_EQ(heldGauge(), 2) << "both held, and a scrape says so";
  send(2, Verb::kHeartbeat, "b", 51s);
  EXPECT_EQ(heldGauge(), 1) << "b heard again, a still held";
  send(2, Verb::kDone, "b", 51s);
  send(1, Verb::kHeartbeat, "a", 58s);
  tick(60s);

  const std::vector<EventType> expected = {EventType::kRound, EventType::kFinished};
  EXPECT_EQ(told("a"), expected);
  EXPECT_EQ(told("b"), expected);
}

// Both report done once the cut is over.
TEST_F(CutOffServiceTest, DonesThatComeAfterTheCutFinishTheBarrier) {
  join(1, "a");
  join(2, "b");
  send(1, Verb::kStoreReady, "a", 0s);
  send(1, Verb::kHeartbeat, "a", 5s);
  send(2, Verb::kHeartbeat, "b", 10s);
  tick(20s);
  tick(25s);
  tick(40s);
  send(1, Verb::kHeartbeat, "a", 41s);
  send(1, Verb::kDone, "a", 41s);
  tick(60s);
  send(2, Verb::kHeartbeat, "b", 70s);
  send(2, Verb::kDone, "b", 70s);

  const std::vector<EventType> expected = {EventType::kRound, EventType::kFinished};
  EXPECT_EQ(told("a"), expected);
  EXPECT_EQ(told("b"), expected);
}

}  // namespace
}  // namespace ddprun::rdzv

// What the rendezvous forgets, socket-free, with a hand-driven clock: a
// closed run after the retention (status answers for it until then), closed
// runs beyond the cap, the events an agent acknowledged; and the `jobs`
// answer, capped and saying so.
#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>

#include "ddprun/metrics/exposition.hpp"
#include "ddprun/proto/rendezvous_protocol.hpp"
#include "ddprun/proto/rendezvous_status.hpp"
#include "ddprun/proto/tcpstore_codec.hpp"
#include "ddprun/proto/tcpstore_wire.hpp"
#include "ddprun/rendezvous/rendezvous_service.hpp"
#include "ddprun/test_support/prometheus.hpp"

namespace ddprun::rdzv {
namespace {

using namespace std::chrono_literals;
namespace protocol = proto::rendezvous;
using Clock = RendezvousService::Clock;
using protocol::Verb;

class NoClients : public ClientSink {
 public:
  void deliver(ClientId, std::string_view) override {}
};

class RunRetentionTest : public ::testing::Test {
 protected:
  static constexpr auto kRetention = 60s;

  // Agent `id` joins run `run` of `nodes` nodes on connection `client`.
  void join(ClientId client, const std::string& id, Clock::time_point now,
            const std::string& run = "job7", int nodes = 1, std::int64_t session = 0) {
    protocol::JoinRequest request;
    request.agent = id;
    request.min_nodes = nodes;
    request.max_nodes = nodes;
    request.keep_alive_timeout = 24h;
    request.store_host = "store-" + id;
    request.store_port = 1;
    request.session = session;
    ASSERT_FALSE(service_->onSet(client, protocol::verbKey(run, Verb::kJoin),
                                 protocol::encodeJoin(request), now, keys_));
  }

  std::optional<RendezvousService::Refusal> send(ClientId client, const std::string& run, Verb verb,
                                                 const std::string& value, Clock::time_point now) {
    return service_->onSet(client, protocol::verbKey(run, verb), value, now, keys_);
  }

  std::string status(const std::string& run, Clock::time_point now) const {
    return service_->answer(protocol::queryKey(protocol::statusQuestion(run)), now);
  }
  protocol::JobList jobs(Clock::time_point now) const {
    return protocol::decodeJobList(service_->answer(protocol::queryKey(protocol::kQueryJobs), now));
  }
  double closedJobs() const {
    metrics::Exposition out;
    service_->collectMetrics(out);
    return test_support::seriesValue(out.text(), "ddprund_jobs{state=\"closed\"}").value_or(-1);
  }
  // The agent's n-th event of session 0 as the store holds it; "" when it
  // holds none.
  std::string event(const std::string& run, const std::string& agent, std::int64_t n) {
    const std::string key = protocol::eventKey(run, agent, 0, n);
    std::string reply;
    EXPECT_FALSE(keys_.execute(99, proto::Dialect::Modern,
                               proto::makeRequest(proto::Command::Get, {key}), reply));
    std::string empty;
    proto::WireWriter(empty).bytes("");
    return reply.substr(empty.size());
  }
  bool holdsEvent(const std::string& run, const std::string& agent, std::int64_t n) {
    return !event(run, agent, n).empty();
  }

  static RendezvousService::Options retained() {
    RendezvousService::Options options;
    options.run_retention = kRetention;
    return options;
  }

  const Clock::time_point start_{};
  NoClients sink_;
  KeySpace keys_{sink_};
  std::unique_ptr<RendezvousService> service_ = std::make_unique<RendezvousService>(retained());
};

// `ddprun status` answers for a closed run until the retention is over;
// then the run, its events and its series are gone, as on a fresh daemon.
TEST_F(RunRetentionTest, AClosedRunIsForgottenAfterTheRetentionWithItsKeys) {
  join(1, "a", start_, "job7", 2);
  join(2, "b", start_, "job7", 2);
  ASSERT_FALSE(send(1, "job7", Verb::kClose, "a", start_ + 1s));
  ASSERT_GT(keys_.numKeys(), 0u) << "the agents' events";
  EXPECT_EQ(closedJobs(), 1);
  EXPECT_LE(service_->nextDeadline().value_or(Clock::time_point::max()), start_ + 1s + kRetention);

  service_->tick(start_ + kRetention, keys_);
  EXPECT_NE(status("job7", start_ + kRetention).find("\"closed\""), std::string::npos)
      << status("job7", start_ + kRetention);
  ASSERT_EQ(jobs(start_ + kRetention).jobs.size(), 1u);

  service_->tick(start_ + 1s + kRetention, keys_);
  EXPECT_NE(status("job7", start_ + 1s + kRetention).find("no rendezvous 'job7'"),
            std::string::npos);
  EXPECT_TRUE(jobs(start_ + 1s + kRetention).jobs.empty());
  EXPECT_EQ(jobs(start_ + 1s + kRetention).total, 0);
  EXPECT_EQ(keys_.numKeys(), 0u);
  EXPECT_EQ(closedJobs(), 0);
  EXPECT_FALSE(service_->nextDeadline());
}

// An aborted run is closed too; a run closing while its agents still hold
// their connections is forgotten all the same.
TEST_F(RunRetentionTest, AFailedRunIsForgottenLikeAClosedOne) {
  join(1, "a", start_, "job8");
  ASSERT_FALSE(send(1, "job8", Verb::kAbort, "a", start_));
  service_->tick(start_ + kRetention, keys_);
  EXPECT_NE(status("job8", start_ + kRetention).find("no rendezvous 'job8'"), std::string::npos);
  EXPECT_EQ(keys_.numKeys(), 0u);
}

// However many jobs close within the retention, at most kMaxClosedRuns are
// held: the one closed longest ago goes first.
TEST_F(RunRetentionTest, ClosedRunsBeyondTheCapAreForgottenOldestFirst) {
  const std::size_t cap = RendezvousService::kMaxClosedRuns;
  for (std::size_t i = 0; i <= cap; ++i) {
    const std::string run = "job" + std::to_string(i);
    join(i + 1, "a", start_, run);
    ASSERT_FALSE(send(i + 1, run, Verb::kClose, "a", start_));
  }
  EXPECT_EQ(closedJobs(), static_cast<double>(cap));
  EXPECT_NE(status("job0", start_).find("no rendezvous 'job0'"), std::string::npos);
  EXPECT_EQ(status("job1", start_).find("error"), std::string::npos);
}

// The answer stays far below a client's reply limit however many runs are
// held: open runs first, and `total` says how many there are.
TEST_F(RunRetentionTest, TheJobsAnswerIsCappedAndSaysSo) {
  const std::size_t cap = RendezvousService::kMaxJobsListed;
  join(1, "a", start_, "a-closed");
  ASSERT_FALSE(send(1, "a-closed", Verb::kClose, "a", start_));
  for (std::size_t i = 0; i < cap; ++i) {
    join(i + 2, "a", start_, "open" + std::to_string(i));
  }
  const protocol::JobList list = jobs(start_);
  EXPECT_EQ(list.jobs.size(), cap);
  EXPECT_EQ(list.total, static_cast<std::int64_t>(cap + 1));
  EXPECT_TRUE(list.capped());
  for (const protocol::JobSummary& job : list.jobs) {
    EXPECT_NE(job.run_id, "a-closed") << "open runs come first";
  }
}

// An agent that has read its events says so; they are dropped, and the
// rest stay for it to read.
TEST_F(RunRetentionTest, EventsAnAgentAcknowledgedAreDropped) {
  join(1, "a", start_, "job7", 2);
  join(2, "b", start_, "job7", 2);
  ASSERT_FALSE(send(1, "job7", Verb::kStoreReady, "a", start_));  // b is told its place
  ASSERT_TRUE(holdsEvent("job7", "a", 0));
  ASSERT_TRUE(holdsEvent("job7", "b", 0));
  EXPECT_TRUE(protocol::decodeEvent(event("job7", "a", 0)).acks) << "the round offers acks";
  ASSERT_FALSE(send(2, "job7", Verb::kRestart, "b", start_));  // round 1: a second event
  ASSERT_TRUE(holdsEvent("job7", "a", 1));

  ASSERT_FALSE(send(1, "job7", Verb::kAck, protocol::encodeEventAck({"a", 0, 1}), start_));
  EXPECT_FALSE(holdsEvent("job7", "a", 0));
  EXPECT_TRUE(holdsEvent("job7", "a", 1)) << "not read yet";
  EXPECT_TRUE(holdsEvent("job7", "b", 0)) << "b's own events are b's to acknowledge";

  // An ack of another session (the agent has joined again since), or past
  // the events there are, drops nothing it should not.
  ASSERT_FALSE(send(1, "job7", Verb::kAck, protocol::encodeEventAck({"a", 5, 2}), start_));
  EXPECT_TRUE(holdsEvent("job7", "a", 1));
  ASSERT_FALSE(send(1, "job7", Verb::kAck, protocol::encodeEventAck({"a", 0, 99}), start_));
  EXPECT_FALSE(holdsEvent("job7", "a", 1));
  ASSERT_FALSE(send(2, "job7", Verb::kRestart, "b", start_));
  EXPECT_TRUE(holdsEvent("job7", "a", 2)) << "events after the ack are told as before";
}

// Only the agent's own lease may acknowledge its events; a malformed ack
// closes its connection, and nothing is dropped.
TEST_F(RunRetentionTest, AnAckForAnotherAgentOrMalformedIsRefused) {
  join(1, "a", start_, "job7", 2);
  join(2, "b", start_, "job7", 2);
  EXPECT_TRUE(send(2, "job7", Verb::kAck, protocol::encodeEventAck({"a", 0, 1}), start_));
  EXPECT_TRUE(send(3, "job7", Verb::kAck, protocol::encodeEventAck({"a", 0, 1}), start_));
  EXPECT_TRUE(send(1, "job7", Verb::kAck, "a", start_));
  EXPECT_TRUE(send(1, "job7", Verb::kAck, R"({"agent":"a","session":0,"read":-1})", start_));
  EXPECT_TRUE(holdsEvent("job7", "a", 0));
}

// An agent that predates acks never sends one: its events stay until it
// joins again, as before, and its job runs as before.
TEST_F(RunRetentionTest, AnOlderAgentsEventsStayUntilItJoinsAgain) {
  join(1, "a", start_, "job7", 2);
  join(2, "b", start_, "job7", 2);
  ASSERT_FALSE(send(1, "job7", Verb::kDone, "a", start_));
  ASSERT_FALSE(send(2, "job7", Verb::kDone, "b", start_));
  EXPECT_TRUE(holdsEvent("job7", "a", 0));
  EXPECT_TRUE(holdsEvent("job7", "a", 1)) << "finished";
  service_->onDisconnect(1, start_, keys_);
  join(3, "a", start_, "job7", 2, /*session=*/1);
  EXPECT_FALSE(holdsEvent("job7", "a", 0));
}

// A rendezvous that predates acks offers none, and takes an ack for the
// unknown verb it was to it: the connection that sent it is closed.
TEST_F(RunRetentionTest, ARendezvousWithoutAcksOffersNoneAndRefusesThem) {
  RendezvousService::Options older = retained();
  older.event_acks = false;
  service_ = std::make_unique<RendezvousService>(older);
  join(1, "a", start_);
  EXPECT_FALSE(protocol::decodeEvent(event("job7", "a", 0)).acks);
  const auto refused = send(1, "job7", Verb::kAck, protocol::encodeEventAck({"a", 0, 1}), start_);
  ASSERT_TRUE(refused);
  EXPECT_NE(refused->why.find("unknown rendezvous request 'ack'"), std::string::npos);
}

}  // namespace
}  // namespace ddprun::rdzv

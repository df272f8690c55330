// The rendezvous's metrics, socket-free, with a hand-driven clock: rounds
// decided and how long they took to form, agents alive and spare per open
// job, agents lost by why, jobs open and closed.
#include <gtest/gtest.h>

#include "ddprun/metrics/exposition.hpp"
#include "ddprun/proto/rendezvous_protocol.hpp"
#include "ddprun/proto/rendezvous_status.hpp"
#include "ddprun/rendezvous/rendezvous_service.hpp"
#include "ddprun/test_support/prometheus.hpp"

namespace ddprun::rdzv {
namespace {

using namespace std::chrono_literals;
namespace protocol = proto::rendezvous;
using Clock = RendezvousService::Clock;
using test_support::seriesValue;

class NoClients : public ClientSink {
 public:
  void deliver(ClientId, std::string_view) override {}
};

class RendezvousMetricsTest : public ::testing::Test {
 protected:
  // Agent `id` joins run `run` (--nnodes 2:2) on connection `client`.
  void join(ClientId client, const std::string& id, Clock::time_point now,
            const std::string& run = "job7") {
    protocol::JoinRequest request;
    request.agent = id;
    request.min_nodes = 2;
    request.max_nodes = 2;
    request.last_call_timeout = 30s;
    request.keep_alive_timeout = 15s;
    request.store_host = "store-" + id;
    request.store_port = 1;
    ASSERT_FALSE(service_.onSet(client, protocol::verbKey(run, protocol::Verb::kJoin),
                                protocol::encodeJoin(request), now, keys_));
  }

  std::string scrape() const {
    metrics::Exposition out;
    service_.collectMetrics(out);
    return out.text();
  }

  double value(const std::string& series) const {
    const auto found = seriesValue(scrape(), series);
    EXPECT_TRUE(found.has_value()) << series << " missing from:\n" << scrape();
    return found.value_or(-1);
  }

  const Clock::time_point start_{};
  NoClients sink_;
  KeySpace keys_{sink_};
  RendezvousService service_;
};

TEST_F(RendezvousMetricsTest, NothingYetIsZeroJobsAndZeroRounds) {
  EXPECT_EQ(value("ddprund_jobs{state=\"open\"}"), 0);
  EXPECT_EQ(value("ddprund_rounds_decided_total"), 0);
  EXPECT_EQ(value("ddprund_round_formation_seconds_count"), 0);
  EXPECT_FALSE(seriesValue(scrape(), "ddprund_agents_alive{run_id=\"job7\"}"));
}

TEST_F(RendezvousMetricsTest, RoundsAgentsSparesAndLossesAreCountedAsTheyHappen) {
  join(1, "a", start_);
  EXPECT_EQ(value("ddprund_agents_alive{run_id=\"job7\"}"), 1);
  EXPECT_EQ(value("ddprund_rounds_decided_total"), 0);
  join(2, "b", start_ + 3s);  // the round forms in 3 s
  join(3, "c", start_ + 4s);  // beyond --nnodes' maximum: a spare
  EXPECT_EQ(value("ddprund_jobs{state=\"open\"}"), 1);
  EXPECT_EQ(value("ddprund_agents_alive{run_id=\"job7\"}"), 3);
  EXPECT_EQ(value("ddprund_spare_agents{run_id=\"job7\"}"), 1);
  EXPECT_EQ(value("ddprund_round{run_id=\"job7\"}"), 0);
  EXPECT_EQ(value("ddprund_rounds_decided_total"), 1);
  EXPECT_EQ(value("ddprund_round_formation_seconds_bucket{le=\"2.5\"}"), 0);
  EXPECT_EQ(value("ddprund_round_formation_seconds_bucket{le=\"5\"}"), 1);
  EXPECT_EQ(value("ddprund_round_formation_seconds_sum"), 3);

  // a's connection closes: the spare takes its place in a round decided at once.
  service_.onDisconnect(1, start_ + 5s, keys_);
  EXPECT_EQ(value("ddprund_agents_lost_total{reason=\"disconnected\"}"), 1);
  EXPECT_EQ(value("ddprund_agents_alive{run_id=\"job7\"}"), 2);
  EXPECT_EQ(value("ddprund_spare_agents{run_id=\"job7\"}"), 0);
  EXPECT_EQ(value("ddprund_round{run_id=\"job7\"}"), 1);
  EXPECT_EQ(value("ddprund_rounds_decided_total"), 2);
  EXPECT_EQ(value("ddprund_round_formation_seconds_bucket{le=\"0.001\"}"), 1);

  // c stays silent past the keep-alive bound while b beats: c is dropped.
  service_.onSet(2, protocol::verbKey("job7", protocol::Verb::kHeartbeat), "b", start_ + 15s,
                 keys_);
  service_.tick(start_ + 21s, keys_);
  EXPECT_EQ(value("ddprund_agents_lost_total{reason=\"silent\"}"), 1);
  EXPECT_EQ(value("ddprund_agents_alive{run_id=\"job7\"}"), 1);
}

TEST_F(RendezvousMetricsTest, AClosedJobLeavesThePerJobGaugesAndCountsAsClosed) {
  join(1, "a", start_);
  join(2, "b", start_);
  join(3, "x", start_, "job8");
  ASSERT_FALSE(service_.onSet(1, protocol::verbKey("job7", protocol::Verb::kClose), "a",
                              start_ + 1s, keys_));
  EXPECT_EQ(value("ddprund_jobs{state=\"open\"}"), 1);
  EXPECT_EQ(value("ddprund_jobs{state=\"closed\"}"), 1);
  EXPECT_FALSE(seriesValue(scrape(), "ddprund_agents_alive{run_id=\"job7\"}"));
  EXPECT_EQ(value("ddprund_agents_alive{run_id=\"job8\"}"), 1);
  // The agents of a job that is over going away is no loss.
  service_.onDisconnect(1, start_ + 2s, keys_);
  EXPECT_EQ(value("ddprund_agents_lost_total{reason=\"disconnected\"}"), 0);
}

// A job whose agents all went away without closing it (killed, their hosts
// lost) is kept, suspended, as long as an agent may come back; past the
// bound it is closed and forgotten: its series leave the scrape, its status
// and its events go. An agent that joins within the bound keeps it.
TEST_F(RendezvousMetricsTest, AJobNoAgentComesBackToIsForgottenAfterTheBound) {
  const auto bound = RendezvousService::kDefaultIdleRunTimeout;
  const auto status = [&](const std::string& run, Clock::time_point now) {
    return service_.answer(protocol::queryKey(protocol::statusQuestion(run)), now);
  };
  join(1, "a", start_);
  join(2, "b", start_);
  join(3, "x", start_, "job8");  // forming: it never had a round
  service_.onDisconnect(1, start_ + 1s, keys_);
  service_.onDisconnect(2, start_ + 2s, keys_);  // job7: suspended, nobody connected
  service_.onDisconnect(3, start_ + 2s, keys_);
  ASSERT_GT(keys_.numKeys(), 0u);
  EXPECT_LE(service_.nextDeadline().value_or(Clock::time_point::max()), start_ + 2s + bound);

  service_.tick(start_ + 2s + bound - 1s, keys_);
  EXPECT_TRUE(seriesValue(scrape(), "ddprund_round{run_id=\"job7\"}")) << scrape();
  EXPECT_EQ(status("job7", start_ + bound).find("error"), std::string::npos);
  join(4, "y", start_ + bound, "job8");  // back in time: job8 is kept

  service_.tick(start_ + 2s + bound, keys_);
  EXPECT_FALSE(seriesValue(scrape(), "ddprund_round{run_id=\"job7\"}")) << scrape();
  EXPECT_FALSE(seriesValue(scrape(), "ddprund_agents_alive{run_id=\"job7\"}")) << scrape();
  EXPECT_NE(status("job7", start_ + 2s + bound).find("no rendezvous 'job7'"), std::string::npos);
  EXPECT_EQ(value("ddprund_jobs{state=\"open\"}"), 1);
  EXPECT_EQ(value("ddprund_agents_alive{run_id=\"job8\"}"), 1);
}

// Joins that go away cannot grow the daemon: beyond kMaxIdleRuns such jobs,
// the one idle longest is forgotten at once, whether the last agent's
// connection closed or it left (and kept its connection).
TEST_F(RendezvousMetricsTest, IdleJobsBeyondTheCapAreForgottenOldestFirst) {
  const std::size_t cap = RendezvousService::kMaxIdleRuns;
  for (std::size_t i = 0; i <= cap; ++i) {
    const auto at = start_ + std::chrono::seconds(i);
    const std::string run = "job" + std::to_string(i);
    join(i + 1, "a", at, run);
    if (i < cap) {
      service_.onDisconnect(i + 1, at, keys_);
    } else {
      ASSERT_FALSE(
          service_.onSet(i + 1, protocol::verbKey(run, protocol::Verb::kLeave), "a", at, keys_));
    }
  }
  EXPECT_EQ(value("ddprund_jobs{state=\"open\"}"), static_cast<double>(cap));
  EXPECT_FALSE(seriesValue(scrape(), "ddprund_round{run_id=\"job0\"}"));
  EXPECT_TRUE(seriesValue(scrape(), "ddprund_round{run_id=\"job1\"}")) << scrape();
}

// A host blamed quarantine_after times: counted once, and shown as
// quarantined while it is.
TEST_F(RendezvousMetricsTest, QuarantinedHostsAreAGaugeAndQuarantinesACounter) {
  EXPECT_EQ(value("ddprund_quarantines_total"), 0);
  for (int i = 1; i <= 3; ++i) {
    protocol::JoinRequest request;
    request.agent = "host" + std::to_string(i) + ":1";
    request.min_nodes = 2;
    request.max_nodes = 3;
    request.keep_alive_timeout = 24h;
    request.quarantine_after = 1;
    request.quarantine_duration = 600s;
    request.store_host = "store";
    request.store_port = 1;
    ASSERT_FALSE(service_.onSet(static_cast<ClientId>(i),
                                protocol::verbKey("job7", protocol::Verb::kJoin),
                                protocol::encodeJoin(request), start_, keys_));
  }
  EXPECT_EQ(value("ddprund_quarantined_hosts{run_id=\"job7\"}"), 0);
  ASSERT_FALSE(service_.onSet(3, protocol::verbKey("job7", protocol::Verb::kRestart), "host3:1",
                              start_ + 1s, keys_));
  EXPECT_EQ(value("ddprund_quarantined_hosts{run_id=\"job7\"}"), 1);
  EXPECT_EQ(value("ddprund_quarantines_total"), 1);
  EXPECT_EQ(value("ddprund_spare_agents{run_id=\"job7\"}"), 1);
  service_.tick(start_ + 601s, keys_);
  EXPECT_EQ(value("ddprund_quarantined_hosts{run_id=\"job7\"}"), 0);
  EXPECT_EQ(value("ddprund_quarantines_total"), 1);
  EXPECT_EQ(value("ddprund_spare_agents{run_id=\"job7\"}"), 0) << "back as a newcomer";
}

}  // namespace
}  // namespace ddprun::rdzv

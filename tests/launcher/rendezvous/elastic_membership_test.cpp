// ElasticMembership against an in-process rendezvous server: whether the
// round it runs still stands when this node's workers fail for good. A
// round hosted by another agent ends with that agent (its server stopped
// here); a running rendezvous keeps it; a lost ddprund keeps it too (the
// workers go on while the agent reconnects). And a quarantined host's
// agent, taken out of its round. The events it has read acknowledged where
// the rendezvous takes acks, and never where it predates them.
#include "ddprun/launcher/rendezvous/elastic_membership.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "ddprun/metrics/exposition.hpp"
#include "ddprun/rendezvous/server.hpp"
#include "ddprun/test_support/eventually.hpp"
#include "ddprun/test_support/prometheus.hpp"

namespace ddprun::launcher {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

class ElasticMembershipTest : public ::testing::Test {
 protected:
  // Serves the rendezvous, hosted by agent `host_agent` ("": a ddprund).
  // `event_acks` false: a rendezvous that predates acks.
  void serve(const std::string& host_agent, bool event_acks = true) {
    rdzv::ServerOptions options;
    options.host = "127.0.0.1";
    options.port = 0;
    options.rendezvous_host_agent = host_agent;
    options.event_acks = event_acks;
    server_ = std::make_unique<rdzv::Server>(options);
    server_->start();
  }

  // Agent `id`'s membership of a job of min..max nodes, joined.
  std::unique_ptr<ElasticMembership> member(const std::string& id, int min_nodes, int max_nodes,
                                            int quarantine_after = 3) {
    ElasticOptions options = optionsFor(id);
    options.min_nodes = min_nodes;
    options.max_nodes = max_nodes;
    options.last_call_timeout = 100ms;
    options.quarantine_after = quarantine_after;
    auto membership = std::make_unique<ElasticMembership>(options);
    EXPECT_TRUE(membership->join());
    return membership;
  }

  ElasticOptions optionsFor(const std::string& id) {
    ElasticOptions options;
    options.host = "127.0.0.1";
    options.port = server_->port();
    options.run_id = "job";
    options.agent_id = id;
    options.keep_alive_interval = 200ms;
    options.keep_alive_max_attempt = 2;
    options.join_timeout = 10s;
    options.store_port = 29999;  // announced only: no worker connects to it here
    return options;
  }

  // One node's membership in a one-node job, in its first round.
  std::unique_ptr<ElasticMembership> joinFirstRound() {
    auto membership = std::make_unique<ElasticMembership>(optionsFor("node-a"));
    EXPECT_TRUE(membership->join());
    const auto round = membership->nextRound();
    EXPECT_TRUE(round.has_value());
    membership->storeReady();
    return membership;
  }

  // Connections the server closed for a request it refused.
  double refusedConnections() const {
    metrics::Exposition out;
    server_->collectMetrics(out);
    return test_support::seriesValue(out.text(),
                                     "ddprund_connections_closed_total{reason=\"bad_request\"}")
        .value_or(-1);
  }

  std::unique_ptr<rdzv::Server> server_;
};

// The round event read is acknowledged, and the rendezvous drops it: a long
// job's events do not pile up in the daemon.
TEST_F(ElasticMembershipTest, EventsReadAreAcknowledgedAndDropped) {
  serve("");
  auto membership = joinFirstRound();
  ASSERT_TRUE(test_support::eventually([&] { return server_->stats().keys == 0; }, 10s));
  EXPECT_TRUE(membership->roundStands());
  EXPECT_EQ(refusedConnections(), 0);
  EXPECT_EQ(server_->agentsConnected("job"), 1u);
}

// A rendezvous that predates acks does not offer them: the agent sends
// none (it would close the lease as an unknown verb), and its events stay.
TEST_F(ElasticMembershipTest, NoAckGoesToARendezvousThatDoesNotOfferThem) {
  serve("", /*event_acks=*/false);
  auto membership = joinFirstRound();
  EXPECT_TRUE(membership->roundStands());  // a lease turn after the round was read
  EXPECT_EQ(refusedConnections(), 0);
  EXPECT_EQ(server_->agentsConnected("job"), 1u);
  EXPECT_EQ(server_->stats().keys, 1u) << "the round event, kept";
}

TEST_F(ElasticMembershipTest, ARoundStandsWhileItsRendezvousServes) {
  serve("node-b");
  auto membership = joinFirstRound();
  const auto asked = Clock::now();
  EXPECT_TRUE(membership->roundStands());
  EXPECT_LT(Clock::now() - asked, 400ms) << "a heartbeat is sent at once, not at its interval";
}

// The agent that hosted the rendezvous is gone (its workers with it): the
// round does not stand, whether or not the loss was seen before the question.
TEST_F(ElasticMembershipTest, ARoundHostedByALostAgentDoesNotStand) {
  serve("node-b");
  auto membership = joinFirstRound();
  ASSERT_TRUE(membership->roundStands());  // the round names its host by now
  server_->stop();
  EXPECT_FALSE(membership->roundStands());
}

TEST_F(ElasticMembershipTest, ARoundOfALostDaemonStands) {
  serve("");
  auto membership = joinFirstRound();
  server_->stop();
  EXPECT_TRUE(membership->roundStands());
}

// A third node joins a running round of two: the round is over at once, but
// node b learns its place in the next only once node 0 has emptied its
// workers' store. b's workers fail first (node 0's were stopped): its round
// must not stand, or b would end the whole job for a membership change.
TEST_F(ElasticMembershipTest, ARoundOverWhoseNextPlaceIsStillHeldDoesNotStand) {
  serve("");
  auto a = member("node-a", 2, 3);
  auto b = member("node-b", 2, 3);
  std::optional<ElasticRound> b_round;
  std::thread b_waits([&] { b_round = b->nextRound(); });
  ASSERT_TRUE(a->nextRound().has_value());
  a->storeReady();
  b_waits.join();
  ASSERT_TRUE(b_round.has_value());
  ASSERT_TRUE(b->roundStands());

  auto c = member("node-c", 2, 3);  // the third of three: the next round, now
  // node-a is told (and does not empty its store here); b's place is held.
  EXPECT_FALSE(b->roundStands());
}

// Host c's workers fail first, once, with quarantine_after 1: the round
// goes on with a and b, and c's agent hears that its round is over, why it
// stands by (the notice its timeline gets), and stays left out.
TEST_F(ElasticMembershipTest, AQuarantinedHostsAgentIsTakenOutOfItsRoundAndTold) {
  serve("");
  auto a = member("host-a:1", 2, 3, 1);
  auto b = member("host-b:2", 2, 3, 1);
  auto c = member("host-c:3", 2, 3, 1);
  std::optional<QuarantineNotice> told;
  std::int64_t over = -1;
  std::mutex seen;
  c->watchQuarantine([&](const QuarantineNotice& notice) {
    std::lock_guard lock(seen);
    told = notice;
  });
  c->onChange([&](std::int64_t newer_round) {
    std::lock_guard lock(seen);
    over = newer_round;
  });
  std::thread others([&] { EXPECT_TRUE(b->nextRound() && c->nextRound()); });
  ASSERT_EQ(a->nextRound()->round, 0);
  a->storeReady();
  others.join();
  EXPECT_FALSE(c->leftOutByQuarantine());

  c->requestRestart({0, 4, 0, 4242, 3, std::nullopt, "exited with code 3"});
  const auto next = a->nextRound();
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(next->round, 1);
  EXPECT_EQ(next->group_world_size, 2) << "c is out";
  // c's reader reads its own events, as quickly as it can.
  EXPECT_TRUE(test_support::eventually(
      [&] {
        std::lock_guard lock(seen);
        return told.has_value() && over >= 0;
      },
      10s));
  std::lock_guard lock(seen);
  ASSERT_TRUE(told.has_value());
  EXPECT_EQ(told->host, "host-c");
  EXPECT_EQ(told->failures, 1);
  EXPECT_GT(told->left, 590s);
  EXPECT_EQ(over, 1) << "its round is over";
  EXPECT_TRUE(c->leftOutByQuarantine());
}

}  // namespace
}  // namespace ddprun::launcher

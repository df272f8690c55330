// ElasticMembership against an in-process rendezvous server: whether the
// round it runs still stands when this node's workers fail for good. A
// round hosted by another agent ends with that agent (its server stopped
// here); a running rendezvous keeps it; a lost ddprund keeps it too (the
// workers go on while the agent reconnects).
#include "ddprun/launcher/elastic_membership.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <memory>

#include "ddprun/rendezvous/server.hpp"

namespace ddprun::launcher {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

class ElasticMembershipTest : public ::testing::Test {
 protected:
  // Serves the rendezvous, hosted by agent `host_agent` ("": a ddprund).
  void serve(const std::string& host_agent) {
    rdzv::ServerOptions options;
    options.host = "127.0.0.1";
    options.port = 0;
    options.rendezvous_host_agent = host_agent;
    server_ = std::make_unique<rdzv::Server>(options);
    server_->start();
  }

  // One node's membership in a one-node job, in its first round.
  std::unique_ptr<ElasticMembership> joinFirstRound() {
    ElasticOptions options;
    options.host = "127.0.0.1";
    options.port = server_->port();
    options.run_id = "job";
    options.agent_id = "node-a";
    options.keep_alive_interval = 200ms;
    options.keep_alive_max_attempt = 2;
    options.join_timeout = 10s;
    options.store_port = 29999;  // announced only: no worker connects to it here
    auto membership = std::make_unique<ElasticMembership>(options);
    EXPECT_TRUE(membership->join());
    const auto round = membership->nextRound();
    EXPECT_TRUE(round.has_value());
    membership->storeReady();
    return membership;
  }

  std::unique_ptr<rdzv::Server> server_;
};

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

}  // namespace
}  // namespace ddprun::launcher

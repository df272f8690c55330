#include "soak_jobs.hpp"

#include <stdexcept>

#include "agent_swarm.hpp"
#include "ddprun/proto/rendezvous_protocol.hpp"
#include "ddprun/proto/rendezvous_status.hpp"
#include "ddprun/rendezvous/client.hpp"
#include "ddprun/test_support/http_get.hpp"
#include "ddprun/test_support/prometheus.hpp"

namespace ddprun::bench {
namespace {

namespace protocol = proto::rendezvous;
using Clock = std::chrono::steady_clock;

// Of every ten jobs, one restarts and one loses an agent.
constexpr std::size_t kMixPeriod = 10;
constexpr std::size_t kRestartSlot = 3;
constexpr std::size_t kLossSlot = 7;

SwarmOptions swarmFor(const SoakJob& job, const SoakTarget& target) {
  SwarmOptions swarm;
  swarm.port = target.port;
  swarm.agents = job.agents;
  swarm.run_id = job.run_id;
  swarm.min_nodes = job.lose_agent ? job.agents - 1 : job.agents;  // the survivors go on
  swarm.max_nodes = job.agents;
  swarm.keep_alive_interval = std::chrono::minutes(1);  // a job lasts milliseconds
  swarm.ack_events = true;
  swarm.daemon_ended = target.daemon_ended;
  return swarm;
}

std::int64_t seriesOr0(const std::string& scrape, const std::string& series) {
  return static_cast<std::int64_t>(test_support::seriesValue(scrape, series).value_or(0));
}

}  // namespace

SoakJob soakJob(std::size_t index) {
  SoakJob job;
  job.run_id = "soak-" + std::to_string(index);
  job.agents = 2 + static_cast<int>(index % 7);
  job.restart = index % kMixPeriod == kRestartSlot;
  job.lose_agent = index % kMixPeriod == kLossSlot;
  return job;
}

void runSoakJob(const SoakJob& job, const SoakTarget& target) {
  AgentSwarm swarm(swarmFor(job, target));
  const auto deadline = Clock::now() + target.job_timeout;
  const int n = job.agents;
  const auto progress = [&] {
    return job.run_id + ": " + std::to_string(swarm.holding(1)) + " of " + std::to_string(n) +
           " agents in a round, " + std::to_string(swarm.closed()) + " closed";
  };
  swarm.connectAll(deadline);
  for (std::size_t agent = 0; agent < swarm.size(); ++agent) {
    swarm.join(agent);
  }
  swarm.runUntil(
      "first round", [&] { return swarm.holding(1) == n; }, progress, deadline);
  std::size_t rounds = 1;
  if (job.restart) {
    swarm.send(0, protocol::Verb::kRestart);
    ++rounds;
    swarm.runUntil(
        "restart", [&] { return swarm.holding(rounds) == n; }, progress, deadline);
  }
  int members = n;
  if (job.lose_agent) {
    swarm.kill(swarm.size() - 1);
    --members;
    ++rounds;
    swarm.runUntil(
        "recovery", [&] { return swarm.holding(rounds) == members; }, progress, deadline);
  }
  for (int agent = 0; agent < members; ++agent) {
    swarm.send(static_cast<std::size_t>(agent), protocol::Verb::kDone);
  }
  swarm.runUntil(
      "exit barrier", [&] { return swarm.closed() == members; }, progress, deadline);
}

DaemonHolding SoakProbe::probe(const std::string& run_id) const {
  const test_support::HttpAnswer scrape = test_support::httpGet(metrics_port_, "/metrics");
  if (scrape.status != 200) {
    throw std::runtime_error("ddprund's /metrics answered " + std::to_string(scrape.status));
  }
  rdzv::StoreClient asker("127.0.0.1", store_port_, std::chrono::seconds(10));
  protocol::decodeJobList(asker.query(protocol::queryKey(protocol::kQueryJobs)));
  if (!run_id.empty()) {
    asker.query(protocol::queryKey(protocol::statusQuestion(run_id)));
  }
  return {seriesOr0(scrape.body, "ddprund_keys"),
          seriesOr0(scrape.body, "ddprund_jobs{state=\"open\"}") +
              seriesOr0(scrape.body, "ddprund_jobs{state=\"closed\"}")};
}

}  // namespace ddprun::bench

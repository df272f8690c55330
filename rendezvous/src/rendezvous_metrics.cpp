// The rendezvous's part of ddprund's metrics: read under the store lock at
// each scrape from what the service holds, plus the few counters it keeps
// (rounds decided, their formation time, agents lost).
#include "ddprun/rendezvous/rendezvous_service.hpp"

namespace ddprun::rdzv {
namespace {

using metrics::MetricType;

// Seconds: a re-form decided at once, a first round waiting for its last
// agents to start, a suspended job waiting for a node to come back.
constexpr double kFormationBuckets[] = {0.001, 0.01, 0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900};

}  // namespace

RendezvousService::Counters::Counters() : formation_seconds(kFormationBuckets) {}

void RendezvousService::collectMetrics(metrics::Exposition& out) const {
  std::size_t open = 0;
  auto& alive = out.family("ddprund_agents_alive", MetricType::kGauge,
                           "Agents of an open job holding their connection (their lease).");
  auto& spares = out.family("ddprund_spare_agents", MetricType::kGauge,
                            "Agents of an open job waiting beyond its maximum node count.");
  auto& round = out.family("ddprund_round", MetricType::kGauge,
                           "The round an open job is in (its TORCHELASTIC_RESTART_COUNT).");
  auto& quarantined =
      out.family("ddprund_quarantined_hosts", MetricType::kGauge,
                 "Hosts of an open job left out of its rounds now: group failures started "
                 "there quarantine_after times.");
  auto& held = out.family("ddprund_agents_held", MetricType::kGauge,
                          "Agents of an open job kept though silent past the keep-alive bound: "
                          "the daemon heard none of its agents, so the silence was its own "
                          "(its link cut).");
  for (const auto& [run_id, run] : runs_) {
    if (run.rdzv.closed()) {
      continue;
    }
    ++open;
    const metrics::Labels labels = {{"run_id", run_id}};
    alive.sample(static_cast<double>(run.leases), labels);
    spares.sample(static_cast<double>(run.rdzv.spareCount()), labels);
    round.sample(static_cast<double>(run.rdzv.round()), labels);
    quarantined.sample(static_cast<double>(run.rdzv.quarantinedHosts()), labels);
    held.sample(static_cast<double>(run.rdzv.heldAgents()), labels);
  }
  auto& jobs = out.family("ddprund_jobs", MetricType::kGauge,
                          "Jobs (run ids) this rendezvous holds: open, or closed and kept for "
                          "--run-retention.");
  jobs.sample(static_cast<double>(open), {{"state", "open"}});
  jobs.sample(static_cast<double>(runs_.size() - open), {{"state", "closed"}});
  out.family("ddprund_rounds_decided_total", MetricType::kCounter,
             "Rounds completed, every job together.")
      .sample(static_cast<double>(counters_.rounds_decided));
  out.family("ddprund_round_formation_seconds", MetricType::kHistogram,
             "From a round's first member (or the loss or arrival that began it) to its "
             "completion.")
      .histogram(counters_.formation_seconds.snapshot());
  auto& lost = out.family("ddprund_agents_lost_total", MetricType::kCounter,
                          "Agents of an open job lost: their connection closed, or they were "
                          "silent past the keep-alive bound.");
  lost.sample(static_cast<double>(counters_.lost_disconnected), {{"reason", "disconnected"}});
  lost.sample(static_cast<double>(counters_.lost_silent), {{"reason", "silent"}});
  out.family("ddprund_quarantines_total", MetricType::kCounter,
             "Hosts quarantined, every job together.")
      .sample(static_cast<double>(counters_.quarantines));
}

}  // namespace ddprun::rdzv

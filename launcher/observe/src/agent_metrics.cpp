#include "ddprun/launcher/observe/agent_metrics.hpp"

#include <string>

namespace ddprun::launcher {
namespace {

using metrics::MetricType;

// Seconds: a single node answers at once, a round waits for the last agent
// to start, a suspended job for a node to come back.
constexpr double kWaitBuckets[] = {0.001, 0.01, 0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900};

constexpr const char* kStopReasonLabels[] = {"failure", "round_over", "signal", "error"};

double seconds(AgentEvents::Clock::duration duration) {
  return std::chrono::duration<double>(duration).count();
}

void gauge(metrics::Exposition& out, const char* name, const char* help, double value,
           const metrics::Labels& labels = {}) {
  out.family(name, MetricType::kGauge, help).sample(value, labels);
}

void counter(metrics::Exposition& out, const char* name, const char* help, std::uint64_t value) {
  out.family(name, MetricType::kCounter, help).sample(static_cast<double>(value));
}

}  // namespace

AgentMetrics::AgentMetrics(int nproc_per_node, int max_restarts, metrics::Labels info)
    : nproc_per_node_(nproc_per_node),
      max_restarts_(max_restarts),
      info_(std::move(info)),
      rendezvous_waits_(kWaitBuckets) {}

void AgentMetrics::rendezvousStarted(Clock::time_point) {
  std::lock_guard lock(mutex_);
  numbers_.waiting = true;
}

void AgentMetrics::roundJoined(const WorkerGroup& group, Clock::duration waited,
                               Clock::time_point) {
  std::lock_guard lock(mutex_);
  numbers_.waiting = false;
  numbers_.group = group;
  numbers_.running = numbers_.exited = numbers_.failed = 0;
  ++numbers_.rounds_joined;
  numbers_.last_wait_seconds = seconds(waited);
  rendezvous_waits_.observe(seconds(waited));
}

void AgentMetrics::workerStarted(int, int, pid_t, Clock::time_point) {
  std::lock_guard lock(mutex_);
  ++numbers_.running;
  ++numbers_.workers_started;
}

void AgentMetrics::workerExited(int, int, pid_t, const ExitStatus& status, bool failed,
                                Clock::time_point) {
  std::lock_guard lock(mutex_);
  --numbers_.running;
  if (failed) {
    ++numbers_.failed;
    ++numbers_.worker_failures;
  } else {
    ++numbers_.exited;
  }
  numbers_.last_worker_exit_code = status.shellCode();
}

void AgentMetrics::groupStopping(StopReason reason, Clock::time_point) {
  std::lock_guard lock(mutex_);
  ++numbers_.stops[static_cast<std::size_t>(reason)];
}

void AgentMetrics::restarting(int restarts_used, int, Clock::time_point) {
  std::lock_guard lock(mutex_);
  numbers_.restarts = static_cast<std::uint64_t>(restarts_used);
}

void AgentMetrics::finished(int exit_code, Clock::time_point) {
  std::lock_guard lock(mutex_);
  numbers_.waiting = false;
  numbers_.exit_code = exit_code;
}

void AgentMetrics::collect(metrics::Exposition& out) const {
  Numbers numbers;
  metrics::HistogramSnapshot waits;
  {
    std::lock_guard lock(mutex_);
    numbers = numbers_;
    waits = rendezvous_waits_.snapshot();
  }
  gauge(out, "ddprun_agent_info", "This agent: its host, run id and rendezvous backend.", 1, info_);
  collectGroup(numbers, out);
  collectCounters(numbers, out);
  gauge(out, "ddprun_rendezvous_waiting", "1 while the agent waits for its next group.",
        numbers.waiting ? 1 : 0);
  if (numbers.last_wait_seconds) {
    gauge(out, "ddprun_last_rendezvous_wait_seconds",
          "How long the agent waited for its last group.", *numbers.last_wait_seconds);
  }
  out.family("ddprun_rendezvous_wait_seconds", MetricType::kHistogram,
             "How long the agent waited for each of its groups.")
      .histogram(waits);
  if (numbers.last_worker_exit_code) {
    gauge(out, "ddprun_last_worker_exit_code",
          "The exit code of the worker that ended last (128 + signal when killed).",
          *numbers.last_worker_exit_code);
  }
  if (numbers.exit_code) {
    gauge(out, "ddprun_exit_code", "ddprun's exit status, once its run is over.",
          *numbers.exit_code);
  }
}

// The group's numbers appear once the agent has joined one.
void AgentMetrics::collectGroup(const Numbers& numbers, metrics::Exposition& out) const {
  gauge(out, "ddprun_local_world_size", "Workers this agent runs per group (--nproc-per-node).",
        nproc_per_node_);
  if (numbers.group) {
    const WorkerGroup& group = *numbers.group;
    gauge(out, "ddprun_attempt",
          "The last group's attempt, its workers' TORCHELASTIC_RESTART_COUNT.", group.attempt);
    gauge(out, "ddprun_world_size", "Workers in the last group, every node's.", group.world_size);
    gauge(out, "ddprun_group_rank", "This node's rank in the last group.", group.group_rank);
    gauge(out, "ddprun_group_world_size", "Nodes in the last group.", group.group_world_size);
  }
  auto& workers = out.family("ddprun_local_workers", MetricType::kGauge,
                             "This node's workers of the last group, by state (exited: "
                             "succeeded, or stopped by the agent).");
  workers.sample(numbers.running, {{"state", "running"}});
  workers.sample(numbers.exited, {{"state", "exited"}});
  workers.sample(numbers.failed, {{"state", "failed"}});
}

void AgentMetrics::collectCounters(const Numbers& numbers, metrics::Exposition& out) const {
  counter(out, "ddprun_workers_started_total", "Workers this agent started.",
          numbers.workers_started);
  counter(out, "ddprun_worker_failures_total",
          "Workers of this node that failed (not those the agent stopped).",
          numbers.worker_failures);
  counter(out, "ddprun_restarts_total",
          "Restarts of the worker group counted against "
          "--max-restarts (not those a membership change caused).",
          numbers.restarts);
  gauge(out, "ddprun_max_restarts", "--max-restarts.", max_restarts_);
  counter(out, "ddprun_rounds_joined_total", "Groups (rounds) this agent joined.",
          numbers.rounds_joined);
  auto& stops = out.family("ddprun_group_stops_total", MetricType::kCounter,
                           "Times the agent stopped its running group, by why.");
  for (std::size_t i = 0; i < numbers.stops.size(); ++i) {
    stops.sample(static_cast<double>(numbers.stops[i]), {{"reason", kStopReasonLabels[i]}});
  }
}

}  // namespace ddprun::launcher

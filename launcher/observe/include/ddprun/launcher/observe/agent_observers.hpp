// Who watches this agent's life, from the flags: the metrics endpoint
// (--metrics-port: AgentMetrics behind a MetricsEndpoint, whose /healthz
// says whether the agent's loop turns: LoopHeartbeat), torchrun's events
// on stderr (--event-log-handler console: TorchEventLog), and those main
// adds (the timeline). Every observer is told through one AgentEventsFanOut,
// which is what AgentConfig::events gets.
//
// Owns the observers, the metrics registry and the endpoint (its own thread,
// started by the constructor, stopped by the destructor). Built on main's
// thread after the agent's fork (no thread may run across a fork); outlives
// the Agent it watches and the end of the job (finishJob), so the last
// numbers can still be scraped while the exit barrier waits.
#pragma once

#include <memory>
#include <string>

#include "ddprun/launcher/core/agent_events.hpp"
#include "ddprun/launcher/core/launch_config.hpp"
#include "ddprun/launcher/core/loop_heartbeat.hpp"
#include "ddprun/launcher/observe/agent_metrics.hpp"
#include "ddprun/launcher/observe/torch_events.hpp"
#include "ddprun/metrics/registry.hpp"
#include "ddprun/rendezvous/metrics_endpoint.hpp"

namespace ddprun::launcher {

class AgentObservers {
 public:
  // Throws NetworkError when the metrics cannot listen on their port. The
  // metrics include those of the rendezvous `rendezvous` hosts, if any; it
  // outlives this object. `entry_point`: what the workers run first (the
  // interpreter, or the executable with --no-python), as events name it.
  AgentObservers(const LaunchConfig& config, int nproc, const std::string& host,
                 const Rendezvous& rendezvous, const std::string& entry_point);
  ~AgentObservers();
  AgentObservers(const AgentObservers&) = delete;
  AgentObservers& operator=(const AgentObservers&) = delete;

  // One more observer (the timeline), borrowed: it must outlive the Agent.
  void add(AgentEvents* observer) {
    fan_out_.add(observer);
    observed_ = true;
  }

  // What AgentConfig::events gets: null when nobody watches.
  AgentEvents* events() { return observed_ ? &fan_out_ : nullptr; }
  // What AgentConfig::heartbeat gets: the beat /healthz judges the agent by
  // (LoopHeartbeat); null without a metrics endpoint.
  LoopHeartbeat* heartbeat() { return endpoint_ ? &heartbeat_ : nullptr; }

 private:
  AgentEventsFanOut fan_out_;
  bool observed_ = false;
  std::unique_ptr<TorchEventLog> torch_events_;
  std::unique_ptr<AgentMetrics> metrics_;
  metrics::Registry registry_;
  LoopHeartbeat heartbeat_;  // before the endpoint that reads it
  std::unique_ptr<rdzv::MetricsEndpoint> endpoint_;
};

}  // namespace ddprun::launcher

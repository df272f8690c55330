#include "ddprun/launcher/observe/agent_observers.hpp"

#include <unistd.h>

#include "ddprun/launcher/core/log.hpp"

namespace ddprun::launcher {

AgentObservers::AgentObservers(const LaunchConfig& config, int nproc, const std::string& host,
                               const Rendezvous& rendezvous, const std::string& entry_point) {
  // torchrun's events logger takes its level from LOGLEVEL: its events are
  // info lines, so WARNING and above quiet them.
  const bool info_logged =
      !config.log_level || *config.log_level == "info" || *config.log_level == "debug";
  if (config.event_log_handler == "console" && info_logged) {
    torch_events_ = std::make_unique<TorchEventLog>(
        TorchEventLog::Job{config.rdzv_id, config.role, host, config.rdzv_backend, entry_point,
                           config.max_restarts},
        STDERR_FILENO);
    fan_out_.add(torch_events_.get());
    observed_ = true;
  }
  if (config.metrics_port) {
    metrics_ = std::make_unique<AgentMetrics>(
        nproc, config.max_restarts,
        metrics::Labels{
            {"host", host}, {"run_id", config.rdzv_id}, {"rdzv_backend", config.rdzv_backend}});
    registry_.add([metrics = metrics_.get()](metrics::Exposition& out) { metrics->collect(out); });
    registry_.add([&rendezvous](metrics::Exposition& out) { rendezvous.collectMetrics(out); });
    endpoint_ = std::make_unique<rdzv::MetricsEndpoint>(
        rdzv::MetricsEndpointOptions{config.metrics_host.value_or(""),
                                     static_cast<std::uint16_t>(*config.metrics_port),
                                     [this] { return heartbeat_.stalled(); }},
        registry_);
    endpoint_->start();
    log().info("serving metrics on http://{}/metrics", endpoint_->listenAddress());
    fan_out_.add(metrics_.get());
    observed_ = true;
  }
}

AgentObservers::~AgentObservers() {
  if (endpoint_) {
    endpoint_->stop();  // before the registry and the observers it reads
  }
}

}  // namespace ddprun::launcher

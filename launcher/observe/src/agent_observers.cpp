#include "ddprun/launcher/observe/agent_observers.hpp"

#include "ddprun/launcher/core/log.hpp"

namespace ddprun::launcher {

AgentObservers::AgentObservers(const LaunchConfig& config, int nproc, const std::string& host,
                               const Rendezvous& rendezvous) {
  if (config.metrics_port) {
    metrics_ = std::make_unique<AgentMetrics>(
        nproc, config.max_restarts,
        metrics::Labels{
            {"host", host}, {"run_id", config.rdzv_id}, {"rdzv_backend", config.rdzv_backend}});
    registry_.add([metrics = metrics_.get()](metrics::Exposition& out) { metrics->collect(out); });
    registry_.add([&rendezvous](metrics::Exposition& out) { rendezvous.collectMetrics(out); });
    endpoint_ = std::make_unique<rdzv::MetricsEndpoint>(
        rdzv::MetricsEndpointOptions{config.metrics_host.value_or(""),
                                     static_cast<std::uint16_t>(*config.metrics_port)},
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

#include "ddprun/launcher/app/rendezvous_backends.hpp"

// A new backend is one class implementing Rendezvous and one entry in kBackends.
#include <functional>
#include <utility>

#include "ddprun/launcher/etcd/etcd_rendezvous.hpp"
#include "ddprun/launcher/rendezvous/c10d_rendezvous.hpp"
#include "ddprun/launcher/rendezvous/standalone_rendezvous.hpp"
#include "ddprun/launcher/rendezvous/static_rendezvous.hpp"
#include "ddprun/proto/errors.hpp"

namespace ddprun::launcher {
namespace {

using Factory = std::function<std::unique_ptr<Rendezvous>(const LaunchConfig&, const NodeInfo&)>;

std::unique_ptr<Rendezvous> makeStatic(const LaunchConfig& config, const NodeInfo& node) {
  StaticRendezvousOptions options;
  options.node_rank = config.node_rank;
  options.nnodes = config.max_nodes;  // torchrun's static world size
  options.nproc_per_node = node.nproc;
  // torchrun reads the endpoint as the store: --rdzv-endpoint when given,
  // else --master-addr:--master-port (derived_rules.cpp).
  options.host = config.rdzv_address->host;
  options.port = static_cast<std::uint16_t>(config.rdzv_address->port);
  options.run_id = config.rdzv_id;
  options.join_timeout = config.rdzv_conf.staticTimeout();
  options.keep_alive_bound =
      config.rdzv_conf.keepAliveInterval() * config.rdzv_conf.keepAliveMaxAttempt();
  options.hostname = node.hostname;
  return std::make_unique<StaticRendezvous>(options);
}

// c10d on one node needs nobody else: it is --standalone with a run id.
std::unique_ptr<Rendezvous> makeC10d(const LaunchConfig& config, const NodeInfo& node) {
  if (config.max_nodes == 1) {
    return std::make_unique<StandaloneRendezvous>(node.nproc);
  }
  return std::make_unique<C10dRendezvous>(config, node);
}

// All agents of a job are ddprun: torchrun's etcd spellings name the one etcd backend.
std::unique_ptr<Rendezvous> makeEtcd(const LaunchConfig& config, const NodeInfo& node) {
  return std::make_unique<EtcdRendezvous>(config, node);
}

const std::pair<const char*, Factory> kBackends[] = {
    {"static", makeStatic}, {"c10d", makeC10d}, {"etcd-v3", makeEtcd},
    {"etcd-v2", makeEtcd},  {"etcd", makeEtcd},
};

}  // namespace

std::unique_ptr<Rendezvous> makeRendezvous(const LaunchConfig& config, const NodeInfo& node) {
  if (config.standalone || config.auto_standalone) {
    return std::make_unique<StandaloneRendezvous>(node.nproc);
  }
  for (const auto& [name, make] : kBackends) {
    if (config.rdzv_backend == name) {
      return make(config, node);
    }
  }
  throw ConfigError("--rdzv-backend " + config.rdzv_backend + " across " +
                    std::to_string(config.max_nodes) +
                    " nodes is not implemented in ddprun (static, c10d and etcd-v3 are)");
}

}  // namespace ddprun::launcher

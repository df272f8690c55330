// This node's store and place in the job, for ddprun's main: which
// rendezvous the flags ask for, the store it needs, and the per-attempt and
// end-of-job coordination. Owned and called by main's thread.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "ddprun/launcher/launch_config.hpp"
#include "ddprun/launcher/static_rendezvous.hpp"
#include "ddprun/proto/env_contract.hpp"
#include "ddprun/proto/errors.hpp"
#include "ddprun/rendezvous/server.hpp"

namespace ddprun::launcher {

// The rendezvous result for a single node, with the store this agent hosts.
inline proto::WorkerEnv singleNodeGroup(const LaunchConfig& config, int nproc,
                                        const std::string& master_addr, std::uint16_t master_port) {
  proto::WorkerEnv group;
  group.world_size = nproc;
  group.local_world_size = nproc;
  group.role_world_size = nproc;
  group.group_world_size = 1;
  group.role_name = config.role;
  group.master_addr = master_addr;
  group.master_port = master_port;
  group.run_id = config.rdzv_id;
  group.max_restarts = config.max_restarts;
  group.use_agent_store = true;  // workers are clients of the store this agent hosts
  return group;
}

// This node's store and place in the job. --standalone (and c10d on one
// node) hosts a private store on a free loopback port: no port race. static
// hosts the store on node 0's --master-port, or joins it, and derives ranks
// from --node-rank.
class NodeRendezvous {
 public:
  NodeRendezvous(const LaunchConfig& config, int nproc) {
    const bool single_c10d = config.rdzv_backend == "c10d" && config.max_nodes == 1;
    if (config.standalone || config.auto_standalone || single_c10d) {
      rdzv::ServerOptions options;
      options.host = "127.0.0.1";
      options.port = 0;
      store_ = std::make_unique<rdzv::Server>(options);
      store_->start();
      group_ = singleNodeGroup(config, nproc, "127.0.0.1", store_->port());
    } else if (config.rdzv_backend == "static") {
      static_ = std::make_unique<StaticRendezvous>(staticOptions(config, nproc));
      group_ = static_->join();
    } else {
      throw ConfigError("--rdzv-backend " + config.rdzv_backend + " across " +
                        std::to_string(config.max_nodes) +
                        " nodes is not implemented in ddprun (static and c10d are)");
    }
    group_.max_restarts = config.max_restarts;
  }

  const proto::WorkerEnv& group() const { return group_; }

  // 2.5+ workers do not prefix their keys per attempt: every attempt starts
  // on an empty store (on every node at once, for static).
  void beforeAttempt(int attempt) {
    if (store_) {
      store_->clearKeySpace();
    } else {
      static_->beforeAttempt(attempt);
    }
  }

  // Keeps node 0's store up until every node's workers are done (torchrun
  // waits 300 s). Returns why it gave up, if it did.
  std::optional<std::string> exitBarrier() {
    if (!static_) {
      return std::nullopt;
    }
    try {
      static_->exitBarrier(std::chrono::seconds(300));
    } catch (const TimeoutError& error) {
      return std::string(error.what());
    }
    return std::nullopt;
  }

 private:
  static StaticRendezvousOptions staticOptions(const LaunchConfig& config, int nproc) {
    StaticRendezvousOptions options;
    options.node_rank = config.node_rank;
    options.nnodes = config.max_nodes;  // torchrun's static world size
    options.nproc_per_node = nproc;
    options.master_addr = config.master_addr;
    options.master_port = static_cast<std::uint16_t>(config.master_port.value_or(29500));
    options.run_id = config.rdzv_id;
    options.role = config.role;
    if (auto timeout = config.rdzv_conf.find("timeout"); timeout != config.rdzv_conf.end()) {
      options.join_timeout = std::chrono::seconds(std::stoi(timeout->second));
    }
    return options;
  }

  std::unique_ptr<rdzv::Server> store_;
  std::unique_ptr<StaticRendezvous> static_;
  proto::WorkerEnv group_;
};

}  // namespace ddprun::launcher

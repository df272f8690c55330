// The one place a rendezvous backend is chosen for the flags: the program
// wires the agent to a backend here, so neither depends on the other. Called
// once, on main's thread.
#pragma once

#include <memory>

#include "ddprun/launcher/core/launch_config.hpp"
#include "ddprun/launcher/core/rendezvous.hpp"

namespace ddprun::launcher {

// The backend the flags ask for: --standalone (and torchrun's single-node
// default, and c10d on one node), static, c10d or etcd across nodes. Binds what it
// hosts (node 0's store, an embedded rendezvous daemon) but contacts no other
// node. Throws ConfigError for a backend ddprun does not have, NetworkError
// when a port it must host is taken.
std::unique_ptr<Rendezvous> makeRendezvous(const LaunchConfig& config, const NodeInfo& node);

}  // namespace ddprun::launcher

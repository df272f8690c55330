// socket_interface: the network interface the workers' Gloo and NCCL sockets
// use when the user named none (GLOO_SOCKET_IFNAME, NCCL_SOCKET_IFNAME;
// docs/torchrun-contract.md §5.3). Gloo otherwise binds the address this
// host's name resolves to, and falls back to loopback when that is all there
// is (a hosts file mapping the name to 127.0.0.1, as containers and many
// clusters have): workers on different hosts then advertise 127.0.0.1 to each
// other and never meet. For a job across hosts the agent then names the
// interface Linux routes the rendezvous endpoint through: the job's network,
// by definition reachable from every node.
//
// Functions only: the decision is pure given a NetworkProbe (tests pass
// their own); systemNetwork() is the one that asks the system. Called once,
// by the main thread, before any worker starts.
#pragma once

#include <boost/asio/ip/address.hpp>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ddprun/launcher/core/environment.hpp"
#include "ddprun/launcher/core/launch_config.hpp"

namespace ddprun::launcher {

using IpAddress = boost::asio::ip::address;

// The variables, each with its value naming `interface`, that the agent sets
// for the workers: each of GLOO_SOCKET_IFNAME and NCCL_SOCKET_IFNAME that
// `env` leaves unset or empty (both libraries read an empty value as unset).
// Each is decided alone: a user's NCCL_SOCKET_IFNAME says nothing about Gloo
// (their syntaxes differ too), and Gloo would still fall back to loopback.
std::vector<std::pair<std::string, std::string>> socketInterfaceVariables(
    const std::string& interface, const Environment& env);

// One address of one network interface, as getifaddrs lists them.
struct InterfaceAddress {
  std::string interface;
  IpAddress address;
};

// The interface holding `address`; nullopt when none does.
std::optional<std::string> interfaceHolding(const std::vector<InterfaceAddress>& interfaces,
                                            const IpAddress& address);

// What the system says, asked only when needed and in this order.
struct NetworkProbe {
  std::string host_name;
  // A host's addresses, in getaddrinfo's order; empty when it does not resolve.
  std::function<std::vector<IpAddress>(const std::string& host)> resolve;
  // The local address the kernel picks to reach `peer:port`; nullopt, with
  // the reason in `why`, when it has no route there.
  std::function<std::optional<IpAddress>(const IpAddress& peer, int port, std::string& why)>
      source_address;
  std::function<std::vector<InterfaceAddress>()> interfaces;
};

// The system's answers: gethostname, getaddrinfo (through Asio's resolver),
// a connected UDP socket's local address, getifaddrs.
NetworkProbe systemNetwork();

struct SocketInterfaceChoice {
  std::string interface;  // empty: the agent sets nothing
  std::string info;       // what was chosen and why, for the log; empty: nothing to say
  std::string warning;    // an interface was needed and none found; empty: none
};

// The interface to name when all of these hold: the job spans hosts (more
// than one node, not --standalone, an endpoint the backend parsed), `env`
// leaves at least one of the two variables to the agent, and this host's
// name resolves to loopback addresses only (or to none). Nothing either when
// the endpoint's first address is loopback: every node is this host.
SocketInterfaceChoice chooseSocketInterface(const LaunchConfig& config, const Environment& env,
                                            const NetworkProbe& probe);

}  // namespace ddprun::launcher

#include "ddprun/launcher/host/socket_interface.hpp"

#include <ifaddrs.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/udp.hpp>
#include <cstring>

#include "ddprun/launcher/core/environment.hpp"
#include "ddprun/proto/env_contract.hpp"

namespace ddprun::launcher {
namespace {

namespace asio = boost::asio;

// Only a job across hosts can have workers on different hosts: --standalone
// and one node keep every worker here, where loopback is right. Plug-in
// backends have no endpoint ddprun parsed.
bool spansHosts(const LaunchConfig& config) {
  return !config.standalone && !config.auto_standalone && config.max_nodes > 1 &&
         config.rdzv_address.has_value();
}

// No address at all counts as loopback: Gloo falls back to loopback then too.
bool onlyLoopback(const std::vector<IpAddress>& addresses) {
  for (const IpAddress& address : addresses) {
    if (!address.is_loopback()) {
      return false;
    }
  }
  return true;
}

std::string listed(const std::vector<IpAddress>& addresses) {
  std::string text;
  for (const IpAddress& address : addresses) {
    text += (text.empty() ? "" : ", ") + address.to_string();
  }
  return text;
}

std::string whyHostNameFails(const std::string& host_name,
                             const std::vector<IpAddress>& addresses) {
  if (addresses.empty()) {
    return "host name '" + host_name + "' does not resolve";
  }
  return "host name '" + host_name + "' resolves only to loopback (" + listed(addresses) + ")";
}

std::string describeEndpoint(const Endpoint& endpoint, const IpAddress* address) {
  std::string text = endpoint.host + ":" + std::to_string(endpoint.port);
  if (address != nullptr && address->to_string() != endpoint.host) {
    text += " (" + address->to_string() + ")";
  }
  return text;
}

std::string assignments(const std::vector<std::pair<std::string, std::string>>& variables) {
  std::string text;
  for (const auto& [name, value] : variables) {
    if (!text.empty()) {
      text += " and ";
    }
    text.append(name).append("=").append(value);
  }
  return text;
}

// The variables of the two the user set, for the info line.
std::string usersOwn(const Environment& env) {
  std::string text;
  for (const std::string_view name :
       {proto::env::kGlooSocketIfname, proto::env::kNcclSocketIfname}) {
    const auto value = env(name);
    if (value && !value->empty()) {
      text += (text.empty() ? "" : ", ") + std::string(name) + "=" + *value;
    }
  }
  return text.empty() ? "" : " (the user's " + text + " kept)";
}

SocketInterfaceChoice chosenInterface(const std::string& interface, const std::string& why,
                                      const Environment& env) {
  SocketInterfaceChoice choice;
  choice.interface = interface;
  choice.info = why + ": the workers get " + assignments(socketInterfaceVariables(interface, env)) +
                usersOwn(env);
  return choice;
}

SocketInterfaceChoice noInterface(const std::string& why_needed, const Endpoint& endpoint,
                                  const IpAddress* address, const std::string& why_none) {
  SocketInterfaceChoice choice;
  choice.warning = why_needed + ", and no interface reaching the rendezvous endpoint " +
                   describeEndpoint(endpoint, address) + " was found (" + why_none +
                   "): GLOO_SOCKET_IFNAME and NCCL_SOCKET_IFNAME stay unset, so workers on "
                   "other hosts may not reach this host's; set them to the job network's "
                   "interface";
  return choice;
}

// "localhost" or a loopback address itself: the user meant this host alone.
// Any other name that resolves to loopback here names this host, and the
// other hosts resolve it to an address of their own (Debian maps a host's
// own name to 127.0.1.1).
bool saysLoopback(const std::string& host) {
  boost::system::error_code error;
  const IpAddress literal = asio::ip::make_address(host, error);
  return error ? host == "localhost" || host.starts_with("localhost.") : literal.is_loopback();
}

// A documentation address (RFC 5737): asking the route to it asks for the
// default route, and nothing is ever sent there.
IpAddress anyRemoteAddress() { return asio::ip::make_address_v4("192.0.2.1"); }

// The interfaces holding an address peers could use: neither loopback nor
// IPv6 link-local (which needs a scope they do not have).
std::vector<std::string> routableInterfaces(const std::vector<InterfaceAddress>& interfaces) {
  std::vector<std::string> names;
  for (const InterfaceAddress& entry : interfaces) {
    const bool link_local = entry.address.is_v6() && entry.address.to_v6().is_link_local();
    if (!entry.address.is_loopback() && !link_local &&
        std::find(names.begin(), names.end(), entry.interface) == names.end()) {
      names.push_back(entry.interface);
    }
  }
  return names;
}

IpAddress fromSockaddr(const sockaddr* address) {
  if (address->sa_family == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(address);
    return asio::ip::address_v4(ntohl(v4->sin_addr.s_addr));
  }
  const auto* v6 = reinterpret_cast<const sockaddr_in6*>(address);
  asio::ip::address_v6::bytes_type bytes;
  std::memcpy(bytes.data(), v6->sin6_addr.s6_addr, bytes.size());
  return asio::ip::address_v6(bytes, v6->sin6_scope_id);
}

// Asio has no interface list: getifaddrs is read by hand.
std::vector<InterfaceAddress> systemInterfaces() {
  std::vector<InterfaceAddress> found;
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) {
    return found;
  }
  for (const ifaddrs* entry = list; entry != nullptr; entry = entry->ifa_next) {
    if (entry->ifa_addr != nullptr &&
        (entry->ifa_addr->sa_family == AF_INET || entry->ifa_addr->sa_family == AF_INET6)) {
      found.push_back({entry->ifa_name, fromSockaddr(entry->ifa_addr)});
    }
  }
  ::freeifaddrs(list);
  return found;
}

// No AI_ADDRCONFIG (Asio's default flag): on a host whose only IPv4 address
// is loopback it would hide the very answer that matters.
std::vector<IpAddress> systemResolve(const std::string& host) {
  asio::io_context io;
  asio::ip::udp::resolver resolver(io);
  boost::system::error_code error;
  const auto results = resolver.resolve(host, "", asio::ip::resolver_base::flags(), error);
  std::vector<IpAddress> addresses;
  if (error) {
    return addresses;
  }
  for (const auto& result : results) {
    const IpAddress address = result.endpoint().address();
    if (std::find(addresses.begin(), addresses.end(), address) == addresses.end()) {
      addresses.push_back(address);
    }
  }
  return addresses;
}

// Connecting a UDP socket sends nothing: the kernel only picks the route and
// the source address it would use, so Linux's routing decides.
std::optional<IpAddress> systemSourceAddress(const IpAddress& peer, int port, std::string& why) {
  asio::io_context io;
  asio::ip::udp::socket socket(io);
  boost::system::error_code error;
  socket.open(peer.is_v4() ? asio::ip::udp::v4() : asio::ip::udp::v6(), error);
  if (!error) {
    socket.connect({peer, static_cast<unsigned short>(port)}, error);
  }
  if (!error) {
    const IpAddress local = socket.local_endpoint(error).address();
    if (!error) {
      return local;
    }
  }
  why = error.message();
  return std::nullopt;
}

std::string systemHostName() { return thisHostName(); }

}  // namespace

std::vector<std::pair<std::string, std::string>> socketInterfaceVariables(
    const std::string& interface, const Environment& env) {
  std::vector<std::pair<std::string, std::string>> variables;
  const auto unset = [&env](std::string_view name) {
    const auto value = env(name);
    return !value || value->empty();
  };
  if (unset(proto::env::kGlooSocketIfname)) {
    variables.emplace_back(proto::env::kGlooSocketIfname, interface);
  }
  // NCCL matches a plain name as a prefix (eth1 would take eth10 too); a
  // leading '=' asks for this interface exactly.
  if (unset(proto::env::kNcclSocketIfname)) {
    variables.emplace_back(proto::env::kNcclSocketIfname, "=" + interface);
  }
  return variables;
}

std::optional<std::string> interfaceHolding(const std::vector<InterfaceAddress>& interfaces,
                                            const IpAddress& address) {
  for (const InterfaceAddress& entry : interfaces) {
    if (entry.address == address) {
      return entry.interface;
    }
  }
  return std::nullopt;
}

NetworkProbe systemNetwork() {
  return {systemHostName(), systemResolve, systemSourceAddress, systemInterfaces};
}

// This host serves the endpoint under a name that resolves to loopback here
// only: how the others reach it, only they know. Its default route's
// interface is where a cluster's hosts reach each other; without one, the
// only interface with an address they could use.
SocketInterfaceChoice chooseForLoopbackEndpoint(const Endpoint& endpoint, const Environment& env,
                                                const NetworkProbe& probe) {
  const std::vector<IpAddress> own = probe.resolve(probe.host_name);
  if (!onlyLoopback(own)) {
    return {};  // Gloo binds the host name's own address, which peers can reach
  }
  const std::string why_needed = whyHostNameFails(probe.host_name, own) +
                                 ", and so does the rendezvous endpoint " + endpoint.host +
                                 ", which names this host";
  const std::vector<InterfaceAddress> interfaces = probe.interfaces();
  std::string why_no_route;
  if (const auto source = probe.source_address(anyRemoteAddress(), endpoint.port, why_no_route)) {
    if (const auto interface = interfaceHolding(interfaces, *source)) {
      return chosenInterface(*interface,
                             why_needed +
                                 "; the other hosts reach it by another address, on its "
                                 "default route's interface",
                             env);
    }
  }
  const std::vector<std::string> candidates = routableInterfaces(interfaces);
  if (candidates.size() == 1) {
    return chosenInterface(candidates.front(),
                           why_needed +
                               "; the other hosts reach it by another address, on its only "
                               "interface with one they can use",
                           env);
  }
  std::string listed_names;
  for (const std::string& name : candidates) {
    listed_names += (listed_names.empty() ? "" : ", ") + name;
  }
  SocketInterfaceChoice choice;
  choice.warning = why_needed + ", and this host has no default route and " +
                   (candidates.empty() ? "no interface other hosts can reach"
                                       : "several interfaces (" + listed_names + ")") +
                   ": GLOO_SOCKET_IFNAME and NCCL_SOCKET_IFNAME stay unset, so workers on other "
                   "hosts may not reach this host's; set them to the job network's interface";
  return choice;
}

SocketInterfaceChoice chooseSocketInterface(const LaunchConfig& config, const Environment& env,
                                            const NetworkProbe& probe) {
  if (!spansHosts(config) || socketInterfaceVariables("", env).empty()) {
    return {};
  }
  const Endpoint& endpoint = *config.rdzv_address;
  const std::vector<IpAddress> peers = probe.resolve(endpoint.host);
  // The first address is the one a connection tries first.
  if (!peers.empty() && peers.front().is_loopback()) {
    if (saysLoopback(endpoint.host)) {
      return {};  // every node is this host
    }
    return chooseForLoopbackEndpoint(endpoint, env, probe);
  }
  const std::vector<IpAddress> own = probe.resolve(probe.host_name);
  if (!onlyLoopback(own)) {
    return {};  // Gloo binds the host name's own address, which peers can reach
  }
  const std::string why_needed = whyHostNameFails(probe.host_name, own);
  if (peers.empty()) {
    return noInterface(why_needed, endpoint, nullptr, "the endpoint does not resolve");
  }
  const IpAddress& peer = peers.front();
  std::string why_no_route;
  const std::optional<IpAddress> source = probe.source_address(peer, endpoint.port, why_no_route);
  if (!source) {
    return noInterface(why_needed, endpoint, &peer, "no route: " + why_no_route);
  }
  const std::optional<std::string> interface = interfaceHolding(probe.interfaces(), *source);
  if (!interface) {
    return noInterface(why_needed, endpoint, &peer,
                       "no interface holds the local address " + source->to_string());
  }
  SocketInterfaceChoice choice;
  choice.interface = *interface;
  choice.info = why_needed + ": the workers get " +
                assignments(socketInterfaceVariables(*interface, env)) + ", the interface of " +
                source->to_string() + ", which reaches the rendezvous endpoint " +
                describeEndpoint(endpoint, &peer) + usersOwn(env);
  return choice;
}

}  // namespace ddprun::launcher

// The workers' socket interface (docs/torchrun-contract.md §5.3), decided
// from a fake network: when a job across hosts needs one, which interface,
// what the log says, and that a user's own variable always wins.
#include "ddprun/launcher/host/socket_interface.hpp"

#include <gtest/gtest.h>

#include <map>

#include "launcher_test_util.hpp"

namespace ddprun::launcher {
namespace {

using testing::EnvMap;

IpAddress ip(const std::string& text) { return boost::asio::ip::make_address(text); }

// A host "vm" whose name maps to 127.0.0.1, on a network 10.1.0.0/24 through
// eth1 (eth0 is another network), routing everything to 10.1.0.5 from eth1's
// address. Counts what was asked, so a test can tell nothing was.
struct FakeNetwork {
  std::map<std::string, std::vector<IpAddress>> names = {
      {"vm", {ip("127.0.0.1")}}, {"node0", {ip("10.1.0.5")}}, {"10.1.0.5", {ip("10.1.0.5")}}};
  std::optional<IpAddress> source = ip("10.1.0.7");
  std::string no_route_why = "Network is unreachable";
  std::vector<InterfaceAddress> interfaces = {{"lo", ip("127.0.0.1")},
                                              {"eth0", ip("192.168.9.2")},
                                              {"eth1", ip("10.1.0.7")},
                                              {"eth1", ip("fe80::1")}};
  int asked = 0;

  NetworkProbe probe() {
    NetworkProbe probe;
    probe.host_name = "vm";
    probe.resolve = [this](const std::string& host) {
      ++asked;
      const auto found = names.find(host);
      return found == names.end() ? std::vector<IpAddress>{} : found->second;
    };
    probe.source_address = [this](const IpAddress&, int, std::string& why) {
      ++asked;
      why = source ? "" : no_route_why;
      return source;
    };
    probe.interfaces = [this] {
      ++asked;
      return interfaces;
    };
    return probe;
  }
};

// --nnodes 2 with the c10d rendezvous at `endpoint`.
LaunchConfig acrossHosts(const std::string& endpoint = "node0:29400") {
  return testing::parse(
      {"--nnodes", "2", "--rdzv-backend", "c10d", "--rdzv-endpoint", endpoint, "t.py"});
}

SocketInterfaceChoice choose(const LaunchConfig& config, FakeNetwork& network, EnvMap env = {}) {
  return chooseSocketInterface(config, mapEnvironment(std::move(env)), network.probe());
}

TEST(SocketInterface, TheInterfaceThatReachesTheEndpointIsChosenAndSaidWhy) {
  FakeNetwork network;
  const SocketInterfaceChoice choice = choose(acrossHosts(), network);
  EXPECT_EQ(choice.interface, "eth1");
  EXPECT_EQ(choice.info,
            "host name 'vm' resolves only to loopback (127.0.0.1): the workers get "
            "GLOO_SOCKET_IFNAME=eth1 and NCCL_SOCKET_IFNAME==eth1, the interface of 10.1.0.7, "
            "which reaches the rendezvous endpoint node0:29400 (10.1.0.5)");
  EXPECT_TRUE(choice.warning.empty());
}

TEST(SocketInterface, TheStaticBackendsEndpointIsMasterAddrAndPort) {
  FakeNetwork network;
  const SocketInterfaceChoice choice =
      choose(testing::parse({"--nnodes", "2", "--master-addr", "10.1.0.5", "t.py"}), network);
  EXPECT_EQ(choice.interface, "eth1");
  EXPECT_TRUE(choice.info.ends_with("which reaches the rendezvous endpoint 10.1.0.5:29500"))
      << choice.info;
}

TEST(SocketInterface, AHostNameThatDoesNotResolveNeedsOneToo) {
  FakeNetwork network;
  network.names.erase("vm");
  const SocketInterfaceChoice choice = choose(acrossHosts(), network);
  EXPECT_EQ(choice.interface, "eth1");
  EXPECT_EQ(choice.info.rfind("host name 'vm' does not resolve: ", 0), 0u) << choice.info;
}

TEST(SocketInterface, NothingWhenTheHostNameHasAnAddressPeersCanReach) {
  FakeNetwork network;
  network.names["vm"] = {ip("127.0.1.1"), ip("10.1.0.7")};
  const SocketInterfaceChoice choice = choose(acrossHosts(), network);
  EXPECT_TRUE(choice.interface.empty());
  EXPECT_TRUE(choice.info.empty());
  EXPECT_TRUE(choice.warning.empty());
}

// Every node is this host: loopback is what the workers should use.
TEST(SocketInterface, NothingWhenTheEndpointIsLoopback) {
  FakeNetwork network;
  for (const std::string endpoint : {"127.0.0.1:29400", "localhost:29400", "[::1]:29400"}) {
    network.names["localhost"] = {ip("127.0.0.1")};
    network.names["127.0.0.1"] = {ip("127.0.0.1")};
    network.names["::1"] = {ip("::1")};
    const SocketInterfaceChoice choice = choose(acrossHosts(endpoint), network);
    EXPECT_TRUE(choice.interface.empty()) << endpoint;
    EXPECT_TRUE(choice.warning.empty()) << endpoint;
  }
}

// The endpoint names this host by a name that resolves to loopback here
// only (Debian maps a host's own name to 127.0.1.1), as under Slurm on its
// first host: the other hosts reach it by another address, which Gloo would
// not bind. Its default route's interface serves them.
TEST(SocketInterface, AnEndpointNamingThisHostAsLoopbackGetsTheDefaultRoutesInterface) {
  FakeNetwork network;
  network.names["node0"] = {ip("127.0.1.1")};
  const SocketInterfaceChoice choice = choose(acrossHosts(), network);
  EXPECT_EQ(choice.interface, "eth1");
  EXPECT_EQ(choice.info,
            "host name 'vm' resolves only to loopback (127.0.0.1), and so does the rendezvous "
            "endpoint node0, which names this host; the other hosts reach it by another address, "
            "on its default route's interface: the workers get GLOO_SOCKET_IFNAME=eth1 and "
            "NCCL_SOCKET_IFNAME==eth1");
  EXPECT_TRUE(choice.warning.empty());
}

// With no default route, the one interface with an address other hosts can
// use (not loopback, not IPv6 link-local) is theirs.
TEST(SocketInterface, WithNoDefaultRouteTheOnlyRoutableInterfaceIsChosen) {
  FakeNetwork network;
  network.names["node0"] = {ip("127.0.1.1")};
  network.source.reset();
  network.interfaces = {{"lo", ip("127.0.0.1")}, {"eth1", ip("10.1.0.7")}, {"eth2", ip("fe80::2")}};
  const SocketInterfaceChoice choice = choose(acrossHosts(), network);
  EXPECT_EQ(choice.interface, "eth1");
  EXPECT_TRUE(
      choice.info.ends_with("on its only interface with one they can use: the workers get "
                            "GLOO_SOCKET_IFNAME=eth1 and NCCL_SOCKET_IFNAME==eth1"))
      << choice.info;
}

TEST(SocketInterface, WithNoDefaultRouteAndSeveralInterfacesNoneIsGuessed) {
  FakeNetwork network;
  network.names["node0"] = {ip("127.0.1.1")};
  network.source.reset();
  const SocketInterfaceChoice choice = choose(acrossHosts(), network);
  EXPECT_TRUE(choice.interface.empty());
  EXPECT_NE(choice.warning.find("no default route and several interfaces (eth0, eth1)"),
            std::string::npos)
      << choice.warning;
}

// A host name that resolves to an address peers can reach is what Gloo binds.
TEST(SocketInterface, NothingForALoopbackEndpointWhenTheHostNameIsReachable) {
  FakeNetwork network;
  network.names["node0"] = {ip("127.0.1.1")};
  network.names["vm"] = {ip("10.1.0.7")};
  EXPECT_TRUE(choose(acrossHosts(), network).interface.empty());
}

// One node, --standalone, or a backend ddprun has no endpoint for: nothing is
// asked of the system at all.
TEST(SocketInterface, NothingIsAskedForAJobOnOneHost) {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"--rdzv-endpoint", "node0:29400", "t.py"},
        std::vector<std::string>{"--standalone", "--nnodes", "1", "t.py"},
        std::vector<std::string>{"--nnodes", "1:2", "--standalone", "t.py"}}) {
    FakeNetwork network;
    EXPECT_TRUE(choose(testing::parse(args), network).interface.empty()) << args[0];
    EXPECT_EQ(network.asked, 0) << args[0];
  }
}

TEST(SocketInterface, NothingIsAskedWhenTheUserSetBoth) {
  FakeNetwork network;
  const SocketInterfaceChoice choice =
      choose(acrossHosts(), network, {{"GLOO_SOCKET_IFNAME", "ib0"}, {"NCCL_SOCKET_IFNAME", "ib"}});
  EXPECT_TRUE(choice.interface.empty());
  EXPECT_TRUE(choice.info.empty());
  EXPECT_EQ(network.asked, 0);
}

// Each variable is decided alone: the one the user set is kept, the other is
// set, and the line says which is which.
TEST(SocketInterface, AUsersOwnVariableIsKeptAndTheOtherSet) {
  FakeNetwork network;
  const SocketInterfaceChoice nccl_set =
      choose(acrossHosts(), network, {{"NCCL_SOCKET_IFNAME", "ib"}});
  EXPECT_EQ(nccl_set.interface, "eth1");
  EXPECT_NE(nccl_set.info.find("the workers get GLOO_SOCKET_IFNAME=eth1, the interface"),
            std::string::npos)
      << nccl_set.info;
  EXPECT_NE(nccl_set.info.find("(the user's NCCL_SOCKET_IFNAME=ib kept)"), std::string::npos)
      << nccl_set.info;

  const auto variables = socketInterfaceVariables(
      "eth1", mapEnvironment({{"GLOO_SOCKET_IFNAME", "ib0"}, {"PATH", "/bin"}}));
  ASSERT_EQ(variables.size(), 1u);
  EXPECT_EQ(variables[0].first, "NCCL_SOCKET_IFNAME");
  EXPECT_EQ(variables[0].second, "=eth1") << "NCCL's exact match: eth1 must not take eth10";
}

// Gloo and NCCL read an empty value as unset, and so does ddprun.
TEST(SocketInterface, AnEmptyValueCountsAsUnset) {
  const auto variables =
      socketInterfaceVariables("eth1", mapEnvironment({{"GLOO_SOCKET_IFNAME", ""}}));
  ASSERT_EQ(variables.size(), 2u);
  EXPECT_EQ(variables[0].first, "GLOO_SOCKET_IFNAME");
  EXPECT_EQ(variables[0].second, "eth1");
}

TEST(SocketInterface, OneWarningAndNothingSetWhenNoInterfaceIsFound) {
  const std::string needed = "host name 'vm' resolves only to loopback (127.0.0.1), and no ";
  FakeNetwork unresolved;
  unresolved.names.erase("node0");
  const SocketInterfaceChoice no_name = choose(acrossHosts(), unresolved);
  EXPECT_TRUE(no_name.interface.empty());
  EXPECT_TRUE(no_name.info.empty());
  EXPECT_EQ(no_name.warning.rfind(needed, 0), 0u) << no_name.warning;
  EXPECT_NE(no_name.warning.find("node0:29400 was found (the endpoint does not resolve): "
                                 "GLOO_SOCKET_IFNAME and NCCL_SOCKET_IFNAME stay unset"),
            std::string::npos)
      << no_name.warning;

  FakeNetwork unreachable;
  unreachable.source.reset();
  const SocketInterfaceChoice no_route = choose(acrossHosts(), unreachable);
  EXPECT_TRUE(no_route.interface.empty());
  EXPECT_NE(no_route.warning.find("(no route: Network is unreachable)"), std::string::npos)
      << no_route.warning;

  FakeNetwork unlisted;
  unlisted.source = ip("10.1.0.99");
  const SocketInterfaceChoice no_interface = choose(acrossHosts(), unlisted);
  EXPECT_TRUE(no_interface.interface.empty());
  EXPECT_NE(no_interface.warning.find("(no interface holds the local address 10.1.0.99)"),
            std::string::npos)
      << no_interface.warning;
}

TEST(SocketInterface, TheInterfaceHoldingAnAddressIsFoundByItsAddress) {
  const FakeNetwork network;
  EXPECT_EQ(interfaceHolding(network.interfaces, ip("10.1.0.7")), "eth1");
  EXPECT_EQ(interfaceHolding(network.interfaces, ip("192.168.9.2")), "eth0");
  EXPECT_EQ(interfaceHolding(network.interfaces, ip("127.0.0.1")), "lo");
  EXPECT_EQ(interfaceHolding(network.interfaces, ip("10.1.0.8")), std::nullopt);
  EXPECT_EQ(interfaceHolding(network.interfaces, ip("::ffff:10.1.0.7")), std::nullopt)
      << "an IPv4-mapped IPv6 address is another address";
}

}  // namespace
}  // namespace ddprun::launcher

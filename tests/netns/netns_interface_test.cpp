// The workers' socket interface across real (namespaced) hosts
// (docs/torchrun-contract.md §5.3). The lab's hosts share the machine's host
// name, which resolves to loopback only: with no GLOO_SOCKET_IFNAME, Gloo
// would bind 127.0.0.1 and advertise it to the other host's workers, which
// can never connect. ddprun names the interface that reaches the rendezvous
// endpoint instead, and a user's own variable is never touched.
#include <unistd.h>

#include <array>
#include <sstream>

#include "netns_train_fixture.hpp"

namespace ddprun::netns_test {
namespace {

std::string machineHostName() {
  std::array<char, 256> name{};
  ::gethostname(name.data(), name.size() - 1);
  return name.data();
}

class NetnsInterfaceTest : public NetnsTrainTest {
 protected:
  // Why the scenario cannot arise here (a lab host resolves the machine's host
  // name to an address that is not loopback, so Gloo would not fall back to
  // loopback); nullopt when it arises. Else `expected_` is how the agent's
  // line starts.
  std::optional<std::string> hostNameNotLoopback(const std::string& host) {
    const std::string name = machineHostName();
    const CommandResult resolved = runCommand(lab_->onHost(host, {"getent", "ahosts", name}));
    std::istringstream lines(resolved.output);
    std::vector<std::string> addresses;
    for (std::string line; std::getline(lines, line);) {
      const std::string address = line.substr(0, line.find_first_of(" \t"));
      if (address.empty() || contains(line, "DGRAM") || contains(line, "RAW")) {
        continue;  // one line per socket type: the STREAM line is enough
      }
      if (address.rfind("127.", 0) != 0 && address != "::1") {
        return "the lab's hosts resolve this machine's host name '" + name + "' to " + address +
               ", not only to loopback: Gloo does not fall back to loopback here";
      }
      addresses.push_back(address);
    }
    expected_ = "host name '" + name + "' ";
    expected_ += addresses.empty() ? "does not resolve" : "resolves only to loopback (";
    return std::nullopt;
  }

  // The agent's info line after the host name part, for the agent on `host`.
  std::string chosen(const std::string& host, const std::string& endpoint) const {
    return "the workers get GLOO_SOCKET_IFNAME=eth0 and NCCL_SOCKET_IFNAME==eth0, the interface "
           "of " +
           lab_->address(host) + ", which reaches the rendezvous endpoint " + endpoint;
  }

  // The mission's static line for node `node_rank`, rendezvous at h1:29603.
  std::vector<std::string> trainLine(int node_rank) {
    std::vector<std::string> args = {"--nnodes=2", "--node-rank=" + std::to_string(node_rank),
                                     "--nproc-per-node=2", "--rdzv-endpoint=h1:29603",
                                     "--no-python"};
    const std::vector<std::string> program = train(3);
    args.insert(args.end(), program.begin(), program.end());
    return args;
  }

  // Both nodes trained 2 x 2 to the end. Over loopback a worker dials its
  // own host for a peer on the other one, is refused, and fails the job; the
  // deadlines bound a hang, should a dial be dropped rather than refused.
  void expectTrainedToTheEnd(Subprocess& a, Subprocess& b) {
    const auto a_status = a.waitFor(180s);
    const auto b_status = b.waitFor(60s);
    ASSERT_TRUE(a_status && a_status->success()) << describe(a_status) << logs({"a", "b"});
    ASSERT_TRUE(b_status && b_status->success()) << describe(b_status) << logs({"a", "b"});
    EXPECT_EQ(snapshotEpochs(), 3);
    EXPECT_TRUE(contains(log("a"), "world 4 (gloo), batch 32 x 4")) << log("a");
  }

  std::string expected_;
};

// The mission's static line on two hosts, as a user types it, and nothing
// else: no GLOO_SOCKET_IFNAME. Both train 2 x 2 to the end, each agent saying
// which interface it gave its workers and why.
TEST_F(NetnsInterfaceTest, TrainAcrossTwoHostsWithNoInterfaceNamed) {
  gloo_socket_ifname_.reset();
  buildLab(2, /*with_daemon=*/false);
  if (const auto reason = hostNameNotLoopback("h1")) {
    GTEST_SKIP() << *reason;
  }
  Subprocess b = ddprunOn("b", "h2", trainLine(1));
  Subprocess a = ddprunOn("a", "h1", trainLine(0));
  expectTrainedToTheEnd(a, b);
  const std::string endpoint = "h1:29603 (" + lab_->address("h1") + ")";
  for (const auto& [name, host] : {std::pair{"a", "h1"}, std::pair{"b", "h2"}}) {
    EXPECT_TRUE(contains(log(name), expected_)) << log(name);
    EXPECT_TRUE(contains(log(name), chosen(host, endpoint))) << log(name);
  }
}

// Under Slurm the endpoint is the first host's name, which Debian maps to
// 127.0.1.1 on that host itself: there the endpoint is loopback, yet the job
// spans hosts. Its workers must bind an address the other host's reach, not
// the loopback one Gloo falls back to. Of two Gloo peers the one with the
// lower address listens and the other dials it: on 10.x a loopback side
// would dial out and get away with it, so the lab is on 192.168.x, as many
// clusters are, where the other host dials 127.0.1.1 and fails.
TEST_F(NetnsInterfaceTest, TrainAcrossTwoHostsWhenTheFirstNamesItselfLoopback) {
  gloo_socket_ifname_.reset();
  lab_network_ = "192.168.77";
  buildLab(2, /*with_daemon=*/false);
  if (const auto reason = hostNameNotLoopback("h1")) {
    GTEST_SKIP() << *reason;
  }
  lab_->nameItselfLoopback("h1");
  Subprocess b = ddprunOn("b", "h2", trainLine(1));
  Subprocess a = ddprunOn("a", "h1", trainLine(0));
  expectTrainedToTheEnd(a, b);
  EXPECT_TRUE(contains(log("a"), "and so does the rendezvous endpoint h1, which names this host"))
      << log("a");
  EXPECT_TRUE(contains(log("a"),
                       "the workers get GLOO_SOCKET_IFNAME=eth0 and "
                       "NCCL_SOCKET_IFNAME==eth0"))
      << log("a");
}

// A user's GLOO_SOCKET_IFNAME reaches the workers untouched, even one ddprun
// would not choose; the NCCL_SOCKET_IFNAME the user left unset is set, and
// the line says whose is whose. c10d, against the lab's ddprund.
TEST_F(NetnsInterfaceTest, AUsersOwnGlooSocketIfnameIsPassedThroughUntouched) {
  gloo_socket_ifname_ = "lo";
  buildLab(2);
  if (const auto reason = hostNameNotLoopback("h1")) {
    GTEST_SKIP() << *reason;
  }
  Subprocess a = agent("a", "h1", "2", {DDPRUN_FAKE_WORKER, "--env-to", dirOf("a").string()});
  Subprocess b = agent("b", "h2", "2", {DDPRUN_FAKE_WORKER, "--env-to", dirOf("b").string()});
  for (Subprocess* agent : {&a, &b}) {
    const auto status = agent->waitFor(60s);
    ASSERT_TRUE(status && status->success()) << describe(status) << logs({"a", "b"});
  }
  for (const auto& [name, host] : {std::pair{"a", "h1"}, std::pair{"b", "h2"}}) {
    for (const std::string local_rank : {"0", "1"}) {
      const auto env = test_support::readEnvFile(dirOf(name) / (local_rank + ".env"));
      const auto value = [&env](const std::string& variable) {
        return env.contains(variable) ? env.at(variable) : "<unset>";
      };
      EXPECT_EQ(value("GLOO_SOCKET_IFNAME"), "lo") << name << " " << local_rank;
      EXPECT_EQ(value("NCCL_SOCKET_IFNAME"), "=eth0") << name << " " << local_rank;
    }
    EXPECT_TRUE(contains(log(name), expected_)) << log(name);
    EXPECT_TRUE(contains(log(name), "the workers get NCCL_SOCKET_IFNAME==eth0, the interface of " +
                                        lab_->address(host) +
                                        ", which reaches the rendezvous endpoint " + endpoint() +
                                        " (the user's GLOO_SOCKET_IFNAME=lo kept)"))
        << log(name);
  }
}

}  // namespace
}  // namespace ddprun::netns_test

// NetLab: a small network of real test hosts on one machine, built from Linux
// network namespaces. Each host is a namespace with loopback up and one veth,
// "eth0", addressed <network>.<10 + its position>/24 (10.77.0 unless the lab
// is built on another network); the other ends of the
// veths are ports of a bridge that lives in a namespace of its own, so
// nothing is added to the machine's own network. Processes are put on a host
// by running them under `ip netns exec`. Every host resolves every host's
// name (/etc/netns/<namespace>/hosts, which `ip netns exec` mounts over
// /etc/hosts), so a test can write "h1:29603" as a user writes "node0:29603".
//
// Namespace names carry the test process's pid and a counter, so parallel
// tests never collide; the destructor deletes every namespace it made (a
// process still inside one keeps it alive, nameless, until it exits), and a
// new lab first deletes the leftovers of test processes that no longer exist,
// killing what still runs inside them (a test killed by ctest's timeout never
// reaches its destructors, and a ddprund it started has no parent-death
// signal).
//
// Needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN) and iproute2's `ip`;
// unavailableReason() says why a lab cannot be built here, so tests can skip.
// Used by one test thread.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "ddprun/test_support/command.hpp"

namespace ddprun::netns_test {

// The PATH given to every child: `ip` lives in sbin.
inline constexpr const char* kChildPath = "/usr/sbin:/usr/bin:/sbin:/bin";

using test_support::CommandResult;  // output: stdout and stderr together

// Variables of a child's environment, in order.
using Variables = test_support::Environment;

// test_support::runCommand with the lab's conventions: argv (argv[0] an
// absolute path, or found on kChildPath) with only PATH (kChildPath unless
// `extra_env` sets it) and `extra_env` in its environment, stdout and stderr
// merged. Throws std::runtime_error if it is still running after `timeout`
// (its process group is killed then).
CommandResult runCommand(const std::vector<std::string>& argv,
                         std::chrono::milliseconds timeout = std::chrono::seconds(30),
                         const Variables& extra_env = {});

// iproute2's `ip`, or "" if there is none.
std::string ipBinary();

// Why no NetLab can be built here (no `ip`, no privileges, no veth or bridge
// support), found once per process by building and deleting a one-host lab;
// nullopt when labs work.
std::optional<std::string> unavailableReason();

class NetLab {
 public:
  static constexpr const char* kInterface = "eth0";   // every host's veth, in its namespace
  static constexpr const char* kNetwork = "10.77.0";  // the hosts' /24, by default

  // Builds the bridge and one host per name (hosts' names: up to 15
  // characters, they name the bridge's ports). Throws std::runtime_error with
  // the failing `ip` command's output, after deleting what it had made.
  // `network`: the first three octets of every host's address.
  explicit NetLab(const std::vector<std::string>& hosts, std::string network = kNetwork);
  ~NetLab();
  NetLab(const NetLab&) = delete;
  NetLab& operator=(const NetLab&) = delete;

  // The namespace of `host`, e.g. "ddprun-netns-4242-0-h1".
  std::string namespaceOf(const std::string& host) const;
  // The host's IPv4 address, e.g. "10.77.0.11".
  std::string address(const std::string& host) const;
  // `argv` run on `host`: {ip, "netns", "exec", <namespace>, argv...}. The
  // process `ip` becomes is argv's program itself (ip execs it), so the pid
  // of the spawned child is the program's pid. `own_name`: in a UTS
  // namespace of its own whose host name is `host` (unshare, then a shell
  // that sets it and execs argv: still the same pid), as on a machine of
  // its own; otherwise every host shares this machine's host name.
  std::vector<std::string> onHost(const std::string& host, std::vector<std::string> argv,
                                  bool own_name = false) const;
  // From now on `host` resolves its own name as Debian's installer writes
  // /etc/hosts: to 127.0.1.1 only; the other hosts still resolve it to its
  // address. Call before starting anything on the lab.
  void nameItselfLoopback(const std::string& host);
  // From now on every host also resolves `names` to `host`'s address, as a
  // Kubernetes headless service's names resolve to its pod ("job-node-0-0.job").
  // Call before starting anything on the lab.
  void addNames(const std::string& host, const std::vector<std::string>& names);
  // Every host's eth0 loses its IPv4 address and gets the IPv6 link-local
  // address fe80::<10 + its position> (no duplicate detection, so it is
  // usable at once): the hosts then reach each other only as
  // fe80::N%eth0, and no name resolves to such an address.
  void useLinkLocalOnly();
  // `host`'s link-local address with its scope, as another host writes it:
  // "fe80::11%eth0".
  std::string linkLocalAddress(const std::string& host) const;
  // Sets the bridge's end of the host's veth down or up: down, the host is
  // cut off without a word (no FIN, no RST reaches anyone).
  void setLink(const std::string& host, bool up);

 private:
  void ip(const std::vector<std::string>& args) const;  // throws on failure
  void writeHostsFiles() const;
  void teardown() noexcept;
  int position(const std::string& host) const;

  std::string ip_;
  std::string network_;
  std::string prefix_;
  std::string bridge_namespace_;
  std::map<std::string, int> hosts_;
  std::set<std::string> loopback_named_;  // nameItselfLoopback's hosts
  std::vector<std::string> created_;      // namespaces to delete
  // addNames' names, by host.
  std::map<std::string, std::vector<std::string>> other_names_;
};

}  // namespace ddprun::netns_test

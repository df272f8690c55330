#include "netns_lab.hpp"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace ddprun::netns_test {
namespace {

constexpr const char* kNamePrefix = "ddprun-netns-";
constexpr const char* kBridge = "br0";
// `ip netns exec NAME` bind-mounts the files of /etc/netns/NAME over /etc:
// each host's hosts file names every host of its lab.
constexpr const char* kNetnsEtc = "/etc/netns";

namespace fs = std::filesystem;

std::string joined(const std::vector<std::string>& argv) {
  std::string text;
  for (const std::string& arg : argv) {
    text += (text.empty() ? "" : " ") + arg;
  }
  return text;
}

// Deletes the namespaces of earlier test processes that are gone (killed by
// a ctest timeout before their destructors ran). Once per process.
void removeStaleNamespaces(const std::string& ip) {
  static std::atomic<bool> done{false};
  if (done.exchange(true)) {
    return;
  }
  const CommandResult list = runCommand({ip, "netns", "list"});
  std::istringstream lines(list.output);
  for (std::string line; std::getline(lines, line);) {
    const std::string name = line.substr(0, line.find(' '));
    if (name.rfind(kNamePrefix, 0) != 0) {
      continue;
    }
    const std::string rest = name.substr(std::string(kNamePrefix).size());
    const pid_t owner = static_cast<pid_t>(std::atol(rest.c_str()));
    if (owner <= 0 || ::kill(owner, 0) == 0 || errno != ESRCH) {
      continue;  // its test still runs
    }
    // What that test started there and left running, should any of it have
    // outlived its parent: nothing else lives in these namespaces.
    std::istringstream pids(runCommand({ip, "netns", "pids", name}).output);
    for (pid_t pid = 0; pids >> pid;) {
      ::kill(pid, SIGKILL);
    }
    runCommand({ip, "netns", "delete", name});
    std::error_code ignored;
    fs::remove_all(fs::path(kNetnsEtc) / name, ignored);
  }
}

}  // namespace

CommandResult runCommand(const std::vector<std::string>& argv, std::chrono::milliseconds timeout,
                         const Variables& extra_env) {
  test_support::CommandOptions options;
  options.env = test_support::withDefaultPath(extra_env, kChildPath);
  options.timeout = timeout;
  options.streams = test_support::Streams::Merged;
  options.throw_on_timeout = true;
  return test_support::runCommand(argv, options);
}

std::string ipBinary() {
  for (const char* candidate : {"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"}) {
    if (::access(candidate, X_OK) == 0) {
      return candidate;
    }
  }
  return "";
}

std::optional<std::string> unavailableReason() {
  static const std::optional<std::string> reason = []() -> std::optional<std::string> {
    if (ipBinary().empty()) {
      return "network namespace tests need iproute2's `ip` (not found in /usr/sbin, /sbin, "
             "/usr/bin or /bin)";
    }
    try {
      NetLab probe({"probe"});
      const CommandResult inside = runCommand(probe.onHost("probe", {"true"}));
      if (inside.code != 0) {
        return "`ip netns exec` does not work here (exit " + std::to_string(inside.code) +
               "): " + inside.output;
      }
    } catch (const std::exception& error) {
      return std::string(
                 "cannot build network namespaces here (they need root, or "
                 "CAP_NET_ADMIN and CAP_SYS_ADMIN, and veth and bridge support): ") +
             error.what();
    }
    return std::nullopt;
  }();
  return reason;
}

NetLab::NetLab(const std::vector<std::string>& hosts, std::string network)
    : ip_(ipBinary()), network_(std::move(network)) {
  static std::atomic<int> counter{0};
  if (ip_.empty()) {
    throw std::runtime_error("no `ip` command");
  }
  removeStaleNamespaces(ip_);
  prefix_ = kNamePrefix + std::to_string(::getpid()) + "-" + std::to_string(counter++) + "-";
  bridge_namespace_ = prefix_ + "bridge";
  try {
    ip({"netns", "add", bridge_namespace_});
    created_.push_back(bridge_namespace_);
    ip({"-n", bridge_namespace_, "link", "set", "lo", "up"});
    ip({"-n", bridge_namespace_, "link", "add", kBridge, "type", "bridge"});
    ip({"-n", bridge_namespace_, "link", "set", kBridge, "up"});
    for (const std::string& host : hosts) {
      if (host.empty() || host.size() > 15 || hosts_.count(host) != 0) {
        throw std::runtime_error("bad or repeated host name '" + host + "'");
      }
      hosts_[host] = static_cast<int>(hosts_.size());
      const std::string ns = namespaceOf(host);
      ip({"netns", "add", ns});
      created_.push_back(ns);
      ip({"-n", ns, "link", "set", "lo", "up"});
      ip({"-n", bridge_namespace_, "link", "add", host, "type", "veth", "peer", "name", kInterface,
          "netns", ns});
      ip({"-n", bridge_namespace_, "link", "set", host, "master", kBridge});
      ip({"-n", bridge_namespace_, "link", "set", host, "up"});
      ip({"-n", ns, "addr", "add", address(host) + "/24", "dev", kInterface});
      ip({"-n", ns, "link", "set", kInterface, "up"});
    }
    writeHostsFiles();
  } catch (...) {
    teardown();
    throw;
  }
}

NetLab::~NetLab() { teardown(); }

void NetLab::teardown() noexcept {
  // Hosts first, the bridge's namespace last (the reverse of creation).
  for (auto it = created_.rbegin(); it != created_.rend(); ++it) {
    try {
      runCommand({ip_, "netns", "delete", *it});
    } catch (...) {
      // Never throw from cleanup; the next lab deletes what is left.
    }
    std::error_code ignored;
    fs::remove_all(fs::path(kNetnsEtc) / *it, ignored);
  }
  created_.clear();
}

// The machine's own hosts file, then one line per host of the lab, so a host
// is reachable by its name (h0, h1, ...) from every host of the lab; a host
// named loopback by itself has Debian's line for its own name instead.
void NetLab::writeHostsFiles() const {
  std::ifstream machine("/etc/hosts");
  std::stringstream common;
  common << machine.rdbuf() << "\n# the hosts of this test lab\n";
  for (const auto& [self, self_position] : hosts_) {
    std::stringstream hosts;
    hosts << common.str();
    for (const auto& [host, position] : hosts_) {
      const bool loopback = host == self && loopback_named_.contains(host);
      hosts << (loopback ? "127.0.1.1" : address(host)) << " " << host << "\n";
      if (const auto names = other_names_.find(host); names != other_names_.end()) {
        for (const std::string& name : names->second) {
          hosts << address(host) << " " << name << "\n";
        }
      }
    }
    const fs::path dir = fs::path(kNetnsEtc) / namespaceOf(self);
    fs::create_directories(dir);
    std::ofstream(dir / "hosts") << hosts.str();
  }
}

void NetLab::nameItselfLoopback(const std::string& host) {
  position(host);  // throws for a host of another lab
  loopback_named_.insert(host);
  writeHostsFiles();
}

void NetLab::useLinkLocalOnly() {
  for (const auto& [host, position] : hosts_) {
    const std::string ns = namespaceOf(host);
    ip({"-n", ns, "addr", "flush", "dev", kInterface});
    ip({"-n", ns, "-6", "addr", "add", "fe80::" + std::to_string(10 + position) + "/64", "dev",
        kInterface, "nodad"});
  }
}

std::string NetLab::linkLocalAddress(const std::string& host) const {
  return "fe80::" + std::to_string(10 + position(host)) + "%" + kInterface;
}

void NetLab::addNames(const std::string& host, const std::vector<std::string>& names) {
  position(host);  // throws for a host of another lab
  auto& known = other_names_[host];
  known.insert(known.end(), names.begin(), names.end());
  writeHostsFiles();
}

void NetLab::ip(const std::vector<std::string>& args) const {
  std::vector<std::string> argv = {ip_};
  argv.insert(argv.end(), args.begin(), args.end());
  const CommandResult result = runCommand(argv);
  if (result.code != 0) {
    throw std::runtime_error("'" + joined(argv) + "' failed (exit " + std::to_string(result.code) +
                             "): " + result.output);
  }
}

int NetLab::position(const std::string& host) const {
  const auto it = hosts_.find(host);
  if (it == hosts_.end()) {
    throw std::invalid_argument("no host '" + host + "' in this lab");
  }
  return it->second;
}

std::string NetLab::namespaceOf(const std::string& host) const {
  position(host);
  return prefix_ + host;
}

std::string NetLab::address(const std::string& host) const {
  return network_ + "." + std::to_string(10 + position(host));
}

std::vector<std::string> NetLab::onHost(const std::string& host, std::vector<std::string> argv,
                                        bool own_name) const {
  std::vector<std::string> full = {ip_, "netns", "exec", namespaceOf(host)};
  if (own_name) {
    // `hostname` and `unshare` from PATH (kChildPath): util-linux and hostname,
    // both essential on Debian.
    full.insert(full.end(),
                {"unshare", "--uts", "sh", "-c", "hostname \"$0\" && exec \"$@\"", host});
  }
  full.insert(full.end(), std::make_move_iterator(argv.begin()),
              std::make_move_iterator(argv.end()));
  return full;
}

void NetLab::setLink(const std::string& host, bool up) {
  position(host);  // throws for a host of another lab
  ip({"-n", bridge_namespace_, "link", "set", host, up ? "up" : "down"});
}

}  // namespace ddprun::netns_test

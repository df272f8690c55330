#include "connection_limits.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <fstream>
#include <sstream>

namespace ddprun::bench {
namespace {

// The whitespace-separated numbers of a /proc/sys file; `fallback` when the
// file cannot be read (another kernel, a container without /proc/sys).
template <std::size_t N>
std::array<std::int64_t, N> readSysctl(const char* path, std::array<std::int64_t, N> fallback) {
  std::ifstream file(path);
  std::array<std::int64_t, N> values{};
  for (auto& value : values) {
    if (!(file >> value)) {
      return fallback;
    }
  }
  return values;
}

}  // namespace

int connectionsThatFit(const test_support::FdLimit& limit) {
  if (limit.soft <= kFdsBesideConnections) {
    return 0;
  }
  const std::uint64_t fit = (limit.soft - kFdsBesideConnections) / 1000 * 1000;
  return static_cast<int>(std::min<std::uint64_t>(fit, 1u << 30));
}

int ephemeralPorts() {
  const auto range = readSysctl<2>("/proc/sys/net/ipv4/ip_local_port_range", {32768, 60999});
  return static_cast<int>(std::max<std::int64_t>(1, range[1] - range[0] + 1));
}

int sourceAddressesFor(int connections) {
  const int usable = std::max(1, ephemeralPorts() / 4);
  return std::max(1, (connections + usable - 1) / usable);
}

int acceptQueueLimit() {
  return static_cast<int>(readSysctl<1>("/proc/sys/net/core/somaxconn", {4096})[0]);
}

int connectWindowFor(int requested) { return std::max(1, std::min(requested, acceptQueueLimit())); }

std::string describeConnectionLimits() {
  const test_support::FdLimit limit = test_support::currentFdLimit();
  std::ostringstream out;
  out << "fd limit (RLIMIT_NOFILE) soft " << limit.soft << ", hard " << limit.hard
      << ", fs.nr_open " << test_support::fsNrOpen() << "; net.ipv4.ip_local_port_range gives "
      << ephemeralPorts() << " ports per source address; net.core.somaxconn " << acceptQueueLimit();
  return out.str();
}

}  // namespace ddprun::bench

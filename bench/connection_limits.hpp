// The kernel limits a loopback benchmark with many connections runs into, and
// how the benchmarks stay inside them: the fd limit (raised by
// test_support::raiseFdLimit), ephemeral ports per source address
// (connections are spread over 127.0.0.x), and the accept queue (connects in
// flight never exceed it). Reads /proc/sys; stateless; any thread.
#pragma once

#include <cstdint>
#include <string>

#include "ddprun/test_support/fd_limit.hpp"

namespace ddprun::bench {

// Descriptors a process keeps for itself besides its connections (listener,
// epoll, logs, /proc reads, LibTorch's threads), with room to spare.
inline constexpr std::uint64_t kFdsBesideConnections = 256;

// The largest connection count, in whole thousands, that a server and this
// process can each hold under `limit` (both have the same limit: the server
// inherits it).
int connectionsThatFit(const test_support::FdLimit& limit);

// Ephemeral ports the kernel hands out per (source address, destination):
// net.ipv4.ip_local_port_range, inclusive.
int ephemeralPorts();

// How many 127.0.0.x source addresses `connections` need so that no source
// address uses more than a quarter of its ephemeral ports. connect() looks for
// a free port by stepping through the range (even ports first) past every
// port in use, so a source address whose ports are mostly taken makes each
// connect slower than the last; the rest of the range also leaves room for
// other programs and for ports still in TIME_WAIT.
int sourceAddressesFor(int connections);

// net.core.somaxconn: the longest accept queue a listener can ask for.
int acceptQueueLimit();

// The number of connects to keep in flight: `requested`, but never more than
// the accept queue holds, so no SYN is dropped and retried a second later.
int connectWindowFor(int requested);

// One line naming the settings that bound connection counts on this machine
// (fd limits, port range, accept queue), for a report's notes.
std::string describeConnectionLimits();

}  // namespace ddprun::bench

// The connection-storm barrier: many raw TCPStore connections, all connected
// first, then each does ADD "barrier" +1 and WAIT ["go"]; the connection whose
// ADD returns N sets "go". It speaks either PyTorch 1.13's request bytes
// (which LibTorch 1.13's server and ddprund both understand) or 2.x's: the
// 2.2+ dialect, each connection opening with VALIDATE and PING as a 2.5+
// client does (ddprund only; LibTorch 1.13's server cannot parse them).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

namespace ddprun::bench {

enum class BarrierBytes { Torch113, Torch2x };

// "1.13" or "2.x", as the tables and the --barrier-bytes flag spell them.
std::string barrierBytesName(BarrierBytes bytes);

struct BarrierOptions {
  std::string host = "127.0.0.1";
  std::uint16_t port = 0;
  int connections = 100000;
  BarrierBytes bytes = BarrierBytes::Torch113;
  // Connects in flight (connecting, or waiting for the probe's reply) at
  // once, capped at the accept queue (connectWindowFor): an overflowing
  // queue drops SYNs, and their 1 s retransmits would measure the kernel
  // instead of the server.
  int connect_window = 1024;
  // 127.0.0.x source addresses to spread connections over; 0 = as many as
  // the ephemeral port range needs for `connections` (sourceAddressesFor).
  int source_addresses = 0;
  std::chrono::milliseconds connect_timeout{60000};
  std::chrono::milliseconds barrier_timeout{60000};
  // The server's pid, to read its memory and CPU time from /proc; 0: none.
  pid_t server_pid = 0;
};

struct BarrierResult {
  int connections = 0;
  BarrierBytes bytes = BarrierBytes::Torch113;
  int source_addresses = 0;      // as used
  int connect_window = 0;        // as used
  int connected = 0;             // connections whose probe the server answered
  int released = 0;              // connections that received STOP_WAITING
  double connect_seconds = 0.0;  // first connect() to the last probe reply (or the deadline)
  double barrier_seconds = 0.0;  // first ADD sent to the last STOP_WAITING received
  double total_seconds = 0.0;    // first connect() to the last STOP_WAITING received
  // The server's, from /proc (0 when no server_pid was given):
  std::size_t rss_before_kib = 0;     // VmRSS before the first connect
  std::size_t rss_connected_kib = 0;  // VmRSS once every connection had connected
  std::size_t peak_rss_kib = 0;       // VmHWM after the run: the server's peak so far
  double server_cpu_seconds = 0.0;    // user + system, first connect to the end
  double client_cpu_seconds = 0.0;    // this process's (the clients'), the same span
  double other_cpu = 0.0;             // other processes' CPU during the run, in cores
  std::string error;                  // why the run stopped short, if it did

  bool allConnected() const { return connections > 0 && connected == connections; }
  bool allReleased() const { return connections > 0 && released == connections; }
  // (VmRSS once connected - VmRSS before) / connections, in bytes; 0 unless
  // every connection connected and the server was measured.
  double rssPerConnectionBytes() const;
};

// Runs the barrier once against a fresh server (the keys "barrier" and "go"
// must not exist yet). Never throws: a deadline, a refused connect or a
// server that dies end the run early, and the result says how far it got.
BarrierResult runBarrier(const BarrierOptions& options);

}  // namespace ddprun::bench

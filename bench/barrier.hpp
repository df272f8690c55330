// The connection-storm barrier: many raw TCPStore connections, all connected
// first, then each does ADD "barrier" +1 and WAIT ["go"]; the connection whose
// ADD returns N sets "go". Speaks the PyTorch 1.13 dialect, which both the
// LibTorch 1.13 server and ddprund understand.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

namespace ddprun::bench {

struct BarrierOptions {
  std::string host = "127.0.0.1";
  std::uint16_t port = 0;
  int connections = 10000;
  // Connections in flight (connecting, or waiting for their probe reply) at
  // once; keeps the SYN and accept queues from overflowing, which would only
  // add 1 s SYN retransmits and measure the kernel instead of the server.
  int connect_window = 1024;
  // Distinct 127.0.0.x source addresses to spread connections over, for when
  // ephemeral ports run short (about 28k per source address by default).
  int source_addresses = 1;
  std::chrono::milliseconds connect_timeout{60000};
  std::chrono::milliseconds barrier_timeout{60000};
  // Returns the server's CPU seconds so far; lets the result say how much CPU
  // other processes took during the run.
  std::function<double()> server_cpu_seconds;
};

struct BarrierResult {
  int connections = 0;
  bool connected = false;        // every connection connected and answered its probe
  bool finished = false;         // every connection received STOP_WAITING
  double connect_seconds = 0.0;  // first connect() to last probe reply
  double barrier_seconds = 0.0;  // first ADD sent to last STOP_WAITING received
  int completed = 0;             // connections released (when not finished)
  double other_cpu = 0.0;        // other processes' CPU during the run, in cores
  std::string error;
};

// Runs the barrier once against a fresh server (the keys "barrier" and "go"
// must not exist yet).
BarrierResult runBarrier(const BarrierOptions& options);

}  // namespace ddprun::bench

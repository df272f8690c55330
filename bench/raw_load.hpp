// A diagnostic load with a cheap client: the same set/get/add/check mix and
// the same bytes as LibTorch 1.13's client sends, but from one epoll thread
// doing one send and one recv per round trip. On a small machine LibTorch's
// client spends more CPU per operation than either server, so this load shows
// what the servers can do when the client is not the bottleneck.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

namespace ddprun::bench {

struct RawLoadOptions {
  std::string host = "127.0.0.1";
  std::uint16_t port = 0;
  int connections = 128;
  std::chrono::milliseconds warmup{1000};
  std::chrono::milliseconds duration{3000};
  std::size_t value_bytes = 64;
  std::function<double()> server_cpu_seconds;
};

struct RawLoadResult {
  int connections = 0;
  double ops_per_second = 0.0;  // round trips/s; 4 per set/get/add/check cycle, as 4 ops
  double p50_us = 0.0;          // per round trip (set+wait, get, add, check)
  double p99_us = 0.0;
  double server_cpu = 0.0;  // cores
  double client_cpu = 0.0;  // cores
  double other_cpu = 0.0;   // other processes on the machine, cores
  std::string error;
  bool ok() const { return error.empty() && ops_per_second > 0; }
  // The server's own CPU per round trip, in µs: its CPU seconds over the
  // measured window divided by the round trips completed in it.
  double serverCpuPerOpUs() const { return ok() ? server_cpu / ops_per_second * 1e6 : 0.0; }
};

RawLoadResult runRawLoad(const RawLoadOptions& options);

}  // namespace ddprun::bench

// The key-value load: N threads, each with its own LibTorch c10d::TCPStore
// client, running a fixed set/get/add/check mix against one server.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

namespace ddprun::bench {

struct LoadOptions {
  std::string host = "127.0.0.1";
  std::uint16_t port = 0;
  int clients = 1;
  std::chrono::milliseconds warmup{1000};
  std::chrono::milliseconds duration{3000};
  std::size_t value_bytes = 64;
  // LibTorch's client timeout: bounds connects and every blocking receive, so
  // a stuck server turns into errors instead of a hang.
  std::chrono::milliseconds client_timeout{30000};
  // How long all clients may take to connect before the point is abandoned.
  std::chrono::milliseconds setup_timeout{60000};
  // Returns the server's CPU seconds so far; sampled around the measured window.
  std::function<double()> server_cpu_seconds;
};

struct LoadResult {
  int clients = 0;
  std::uint64_t ops = 0;  // operations completed in the measured window
  double seconds = 0.0;   // length of the measured window
  double ops_per_second = 0.0;
  double p50_us = 0.0;
  double p99_us = 0.0;
  double p90_us = 0.0;  // the tail in more detail, for --detail
  double p999_us = 0.0;
  double max_us = 0.0;
  std::uint64_t min_client_ops = 0;  // fairness: the least and most served client
  std::uint64_t max_client_ops = 0;
  double server_cpu = 0.0;     // server CPU during the window, in cores
  double bench_cpu = 0.0;      // this process's CPU during the window, in cores
  double other_cpu = 0.0;      // everything else on the machine then, in cores
  double setup_seconds = 0.0;  // all clients connected, each after one round trip
  int threads = 0;             // threads in this process once all clients connected
  int open_fds = 0;            // fds in this process then (two sockets per 1.13 client)
  std::uint64_t errors = 0;    // clients that failed to connect or threw
  std::string first_error;
  bool ok() const { return errors == 0 && ops > 0; }
};

// Runs one load point: connect every client, warm up, measure, stop. Latency
// is per operation (a get is WAIT + GET on the wire, i.e. two round trips).
LoadResult runLoad(const LoadOptions& options);

}  // namespace ddprun::bench

// store_bench's measurements: the same TCPStore load against ddprund and
// against LibTorch's own c10d::TCPStore server, side by side, printed as
// Markdown tables.
//
// Both servers run as child processes on free ports; this process only
// generates load (LibTorch 1.13 clients for the key-value mix; raw epoll
// sockets for --raw-load and the 10,000-connection barrier). The printed
// setup line and column headers say what each figure means.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace ddprun::bench {

struct StoreOptions {
  double duration_s = 3.0;
  double warmup_s = 1.0;
  int repeat = 1;
  std::vector<int> clients = {1, 16, 128, 1024};
  int barrier_clients = 10000;
  int barrier_window = 1024;
  int barrier_sources = 1;
  double barrier_timeout_s = 60.0;
  bool skip_barrier = false;
  bool skip_load = false;
  bool raw_load = false;
  bool detail = false;
  std::string ddprund;
  std::string libtorch_server;
  int ddprund_threads = 1;
};

// Runs every load point, the raw load and the barrier as `options` asks
// (progress on stderr), and prints the tables to `out`.
void runStoreBench(const StoreOptions& options, std::ostream& out);

}  // namespace ddprun::bench

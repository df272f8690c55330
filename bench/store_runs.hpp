// store_bench's measurements: the same TCPStore load against ddprund and
// against LibTorch's own c10d::TCPStore server, side by side, printed as
// Markdown tables; then the store-scale tables (store_scale.hpp): the
// 100,000-connection barrier, the servers' CPU per operation under the raw
// load (with the echo floor's, the kernel's limit), and ddprund's growth with
// connection count; then ddprund's CPU for
// requests of many keys (store_big_request.hpp).
//
// Both servers run as child processes on free ports; this process only
// generates load (LibTorch 1.13 clients for the key-value mix; raw epoll
// sockets for the raw load and the barrier). The printed setup line and
// column headers say what each figure means.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "barrier.hpp"

namespace ddprun::bench {

struct StoreOptions {
  double duration_s = 3.0;
  double warmup_s = 1.0;
  int repeat = 1;
  std::vector<int> clients = {1, 16, 128, 1024};  // LibTorch-client load points
  std::vector<int> raw_clients = {128};           // raw-load (CPU per operation) points
  int barrier_clients = 100000;
  std::vector<BarrierBytes> barrier_bytes = {BarrierBytes::Torch113, BarrierBytes::Torch2x};
  int barrier_window = 1024;
  int barrier_sources = 0;  // 0: as many as the connection count needs
  double barrier_timeout_s = 60.0;
  std::vector<int> growth = {128, 1000, 10000, 100000};
  std::vector<int> big_request_keys = {16384, 131072};  // the large-request table
  bool skip_barrier = false;
  bool skip_load = false;         // both loads: LibTorch's clients and the raw one
  bool skip_client_load = false;  // LibTorch's clients only
  bool skip_growth = false;
  bool skip_big_requests = false;
  bool detail = false;
  std::string ddprund;
  std::string libtorch_server;
  std::string echo_floor;  // the raw load's floor (echo_floor.cpp)
  int ddprund_threads = 1;
};

// Runs every load point, then the store-scale sections, as `options` asks
// (progress on stderr), and prints the tables to `out`.
void runStoreBench(const StoreOptions& options, std::ostream& out);

}  // namespace ddprun::bench

// The store at scale: ddprund against LibTorch's TCPStore server where both
// can be measured, printed as Markdown tables beside their targets:
//
//   1. the ADD+WAIT barrier at 100,000 connections, in 1.13 and 2.x request
//      bytes: time, every client answered, the server's memory and CPU;
//   2. the server's own CPU per operation under the raw epoll load, beside
//      the echo floor's (echo_floor.cpp): what the kernel alone costs;
//   3. how ddprund's cost grows with store clients (128 to 100,000).
//
// Needs no LibTorch itself: LibTorch's server is the libtorch_store_server
// helper, run as a child when it exists (its rows say so when it does not),
// and the echo floor is the echo_floor helper, run the same way;
// so rdzv_scale prints these tables as well as store_bench. Every server is a
// fresh child process on a free port; this process only generates load.
#pragma once

#include <filesystem>
#include <ostream>
#include <vector>

#include "barrier.hpp"

namespace ddprun::bench {

struct StoreScaleOptions {
  std::filesystem::path ddprund;
  std::filesystem::path libtorch_server;  // may be missing: LibTorch's rows say so
  std::filesystem::path echo_floor;       // may be missing: its columns say so
  int ddprund_threads = 1;
  // The barrier table; skipped when barrier_bytes is empty.
  int barrier_connections = 100000;
  std::vector<BarrierBytes> barrier_bytes = {BarrierBytes::Torch113, BarrierBytes::Torch2x};
  int barrier_window = 1024;
  int barrier_sources = 0;  // 0: as many as the connection count needs
  // Each phase (connect, barrier) of each run gets this long; LibTorch's
  // server is reported as far as it got.
  double barrier_timeout_s = 60.0;
  // The CPU-per-operation table (raw load; ddprund, LibTorch's server and the
  // echo floor at each count); skipped when empty.
  std::vector<int> cpu_connections = {128};
  double warmup_s = 1.0;
  double duration_s = 3.0;
  int repeat = 3;  // runs per point, alternating the servers
  // The growth table (ddprund, 2.x bytes); skipped when empty.
  std::vector<int> growth = {128, 1000, 10000, 100000};
};

// Runs every section `options` asks for (progress on stderr) and prints the
// tables to `out`. Raises this process's fd limit first, which the servers
// inherit.
void runStoreScale(const StoreScaleOptions& options, std::ostream& out);

}  // namespace ddprun::bench

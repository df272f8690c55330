// store_bench's runs: for each load point, a fresh server of each kind, the
// load, and the server's exit; then the tables (see store_runs.hpp).
#include "store_runs.hpp"

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <iomanip>
#include <iostream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "ddprun/test_support/fd_limit.hpp"
#include "ddprun/test_support/temp_dir.hpp"
#include "load_gen.hpp"
#include "report.hpp"
#include "servers.hpp"
#include "store_big_request.hpp"
#include "store_scale.hpp"
#include "watchdog.hpp"

namespace ddprun::bench {
namespace {

using std::chrono::milliseconds;

milliseconds toMs(double seconds) { return milliseconds(static_cast<long long>(seconds * 1000)); }

LoadResult measureLoad(ServerKind kind, const ServerConfig& config,
                       const test_support::TempDir& scratch, const StoreOptions& options,
                       int clients, ReportContext& context) {
  std::cerr << "store_bench: " << clients << " clients against " << serverName(kind) << "..."
            << std::endl;
  // Setup, warm-up, window and teardown, each bounded, plus slack.
  Watchdog watchdog(
      "the load point (" + std::to_string(clients) + " clients, " + serverName(kind) + ")",
      toMs(options.warmup_s + options.duration_s) + milliseconds(150000));
  RunningServer server(kind, config, scratch);
  LoadOptions load;
  load.port = server.port();
  load.clients = clients;
  load.warmup = toMs(options.warmup_s);
  load.duration = toMs(options.duration_s);
  load.server_cpu_seconds = [&server] { return server.cpuSeconds(); };
  LoadResult result = runLoad(load);
  const std::string exit_status = server.stop();
  const std::string where = serverName(kind) + ", " + std::to_string(clients) + " clients";
  if (!result.ok()) {
    context.notes.push_back(where + ": " + std::to_string(result.errors) +
                            " client error(s); first: " + result.first_error);
  }
  if (exit_status != "exit 0") {
    context.notes.push_back(where + ": server " + exit_status + " on SIGTERM");
  }
  return result;
}

// The run with the median throughput, so one disturbed run cannot skew a row.
LoadResult medianRun(std::vector<LoadResult> runs) {
  std::sort(runs.begin(), runs.end(),
            [](const auto& a, const auto& b) { return a.ops_per_second < b.ops_per_second; });
  return runs[runs.size() / 2];
}

std::vector<LoadComparison> runLoadPoints(const ServerConfig& config,
                                          const test_support::TempDir& scratch,
                                          const StoreOptions& options, ReportContext& context) {
  std::vector<LoadComparison> rows;
  for (int clients : options.clients) {
    // Alternating the servers spreads other users' load on the machine evenly.
    std::vector<LoadResult> ddprund_runs, libtorch_runs;
    for (int run = 0; run < options.repeat; ++run) {
      ddprund_runs.push_back(
          measureLoad(ServerKind::Ddprund, config, scratch, options, clients, context));
      libtorch_runs.push_back(
          measureLoad(ServerKind::Libtorch, config, scratch, options, clients, context));
    }
    LoadComparison row;
    row.ddprund = medianRun(ddprund_runs);
    row.libtorch = medianRun(libtorch_runs);
    rows.push_back(row);
  }
  // Says how the largest point fits: a 1.13 client object holds two sockets
  // and its own callback thread.
  if (!rows.empty()) {
    const LoadResult& largest = rows.back().libtorch;
    context.notes.push_back(std::to_string(largest.clients) + " clients: store_bench held " +
                            std::to_string(largest.threads) + " threads and " +
                            std::to_string(largest.open_fds) + " fds once all had connected");
  }
  return rows;
}

std::string describeSetup(const StoreOptions& options, std::uint64_t fd_limit) {
  std::ostringstream out;
  out << "LibTorch 1.13 c10d::TCPStore clients, one per thread; 25% each set/get/add/check on "
         "the client's own keys, 64-byte values; get = WAIT+GET on the wire. "
      << options.warmup_s << " s warm-up, " << options.duration_s << " s measured per point"
      << (options.repeat > 1 ? ", median of " + std::to_string(options.repeat) + " runs" : "")
      << "; ddprund --threads " << options.ddprund_threads << "; "
      << std::thread::hardware_concurrency() << " CPUs shared by the server and the clients; "
      << "fd limit " << fd_limit << "; 1-minute load average before the run " << std::fixed
      << std::setprecision(2) << loadAverage() << ".";
  return out.str();
}

void printLoadReport(std::ostream& out, const StoreOptions& options,
                     const std::vector<LoadComparison>& rows, const ReportContext& context) {
  out << "\n" << context.setup << "\n\n";
  printLoadTable(out, rows);
  if (options.detail) {
    out << "\n";
    printLoadDetail(out, rows);
  }
  printNotes(out, context);
}

StoreScaleOptions scaleOptions(const StoreOptions& options) {
  StoreScaleOptions scale;
  scale.ddprund = options.ddprund;
  scale.libtorch_server = options.libtorch_server;
  scale.echo_floor = options.echo_floor;
  scale.ddprund_threads = options.ddprund_threads;
  scale.barrier_connections = options.barrier_clients;
  scale.barrier_bytes = options.skip_barrier ? std::vector<BarrierBytes>{} : options.barrier_bytes;
  scale.barrier_window = options.barrier_window;
  scale.barrier_sources = options.barrier_sources;
  scale.barrier_timeout_s = options.barrier_timeout_s;
  scale.cpu_connections = options.skip_load ? std::vector<int>{} : options.raw_clients;
  scale.warmup_s = options.warmup_s;
  scale.duration_s = options.duration_s;
  scale.repeat = options.repeat;
  scale.growth = options.skip_growth ? std::vector<int>{} : options.growth;
  return scale;
}

}  // namespace

void runStoreBench(const StoreOptions& options, std::ostream& out) {
  // A server that dies mid-run must show up as an error, not kill us.
  ::signal(SIGPIPE, SIG_IGN);
  if (!options.skip_load && !options.skip_client_load) {
    ReportContext context;
    context.setup = describeSetup(options, test_support::raiseFdLimit().soft);
    ServerConfig config;
    config.ddprund = options.ddprund;
    config.libtorch_server = options.libtorch_server;
    config.ddprund_threads = options.ddprund_threads;
    const test_support::TempDir scratch("store_bench");
    const auto rows = runLoadPoints(config, scratch, options, context);
    printLoadReport(out, options, rows, context);
  }
  runStoreScale(scaleOptions(options), out);
  if (!options.skip_big_requests) {
    runBigRequests(
        {options.ddprund, options.ddprund_threads, options.big_request_keys, options.repeat}, out);
  }
}

}  // namespace ddprun::bench

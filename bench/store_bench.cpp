// store_bench: the same TCPStore load against ddprund and against LibTorch's
// own c10d::TCPStore server, side by side, printed as Markdown tables.
//
// Both servers run as child processes on free ports; this process only
// generates load (LibTorch 1.13 clients for the key-value mix; raw epoll
// sockets for --raw-load and the 10,000-connection barrier). The printed
// setup line and column headers say what each figure means.
#include <signal.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <exception>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "barrier.hpp"
#include "child_process.hpp"
#include "load_gen.hpp"
#include "report.hpp"
#include "servers.hpp"

namespace bench = ddprun::bench;
using std::chrono::milliseconds;

namespace {

struct BenchOptions {
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

milliseconds toMs(double seconds) { return milliseconds(static_cast<long long>(seconds * 1000)); }

// Built next to ddprund in the same build tree unless told otherwise.
std::string defaultDdprund() {
#ifdef DDPRUN_BENCH_DDPRUND_PATH
  return DDPRUN_BENCH_DDPRUND_PATH;
#else
  return (bench::selfDirectory() / ".." / "rendezvous" / "ddprund").lexically_normal().string();
#endif
}

void addOptions(CLI::App& app, BenchOptions& options) {
  app.add_option("--duration", options.duration_s, "Measured seconds per load point")
      ->capture_default_str();
  app.add_option("--warmup", options.warmup_s, "Warm-up seconds per load point")
      ->capture_default_str();
  app.add_option("--repeat", options.repeat,
                 "Runs per point, alternating the servers; the median run by ops/s is shown")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--clients", options.clients, "Client counts, comma-separated")
      ->delimiter(',')
      ->capture_default_str();
  app.add_option("--barrier-clients", options.barrier_clients, "Connections in the barrier")
      ->capture_default_str();
  app.add_option("--barrier-window", options.barrier_window,
                 "Connections in flight while connecting")
      ->capture_default_str();
  app.add_option("--barrier-sources", options.barrier_sources,
                 "127.0.0.x source addresses to spread barrier connections over")
      ->capture_default_str();
  app.add_option("--barrier-timeout", options.barrier_timeout_s,
                 "Seconds each barrier phase (connect, barrier) may take")
      ->capture_default_str();
  app.add_flag("--skip-barrier", options.skip_barrier, "Skip the barrier");
  app.add_flag("--skip-load", options.skip_load, "Skip the key-value load");
  app.add_flag("--detail", options.detail, "Also print tail percentiles and per-client fairness");
  app.add_flag("--raw-load", options.raw_load,
               "Also run the mix from a cheap epoll client (shows server capacity when "
               "LibTorch's client is the bottleneck)");
  app.add_option("--ddprund", options.ddprund, "The ddprund executable")->capture_default_str();
  app.add_option("--libtorch-server", options.libtorch_server, "The libtorch_store_server helper")
      ->capture_default_str();
  app.add_option("--ddprund-threads", options.ddprund_threads, "Passed to ddprund --threads")
      ->capture_default_str();
}

bench::LoadResult measureLoad(bench::ServerKind kind, const bench::ServerConfig& config,
                              const bench::TempDir& scratch, const BenchOptions& options,
                              int clients, bench::ReportContext& context) {
  std::cerr << "store_bench: " << clients << " clients against " << bench::serverName(kind) << "..."
            << std::endl;
  // Setup, warm-up, window and teardown, each bounded, plus slack.
  bench::Watchdog watchdog(
      "the load point (" + std::to_string(clients) + " clients, " + bench::serverName(kind) + ")",
      toMs(options.warmup_s + options.duration_s) + milliseconds(150000));
  bench::RunningServer server(kind, config, scratch);
  bench::LoadOptions load;
  load.port = server.port();
  load.clients = clients;
  load.warmup = toMs(options.warmup_s);
  load.duration = toMs(options.duration_s);
  load.server_cpu_seconds = [&server] { return server.cpuSeconds(); };
  bench::LoadResult result = bench::runLoad(load);
  const std::string exit_status = server.stop();
  const std::string where = bench::serverName(kind) + ", " + std::to_string(clients) + " clients";
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
bench::LoadResult medianRun(std::vector<bench::LoadResult> runs) {
  std::sort(runs.begin(), runs.end(),
            [](const auto& a, const auto& b) { return a.ops_per_second < b.ops_per_second; });
  return runs[runs.size() / 2];
}

std::vector<bench::LoadComparison> runLoadPoints(const bench::ServerConfig& config,
                                                 const bench::TempDir& scratch,
                                                 const BenchOptions& options,
                                                 bench::ReportContext& context) {
  std::vector<bench::LoadComparison> rows;
  for (int clients : options.clients) {
    // Alternating the servers spreads other users' load on the machine evenly.
    std::vector<bench::LoadResult> ddprund_runs, libtorch_runs;
    for (int run = 0; run < options.repeat; ++run) {
      ddprund_runs.push_back(
          measureLoad(bench::ServerKind::Ddprund, config, scratch, options, clients, context));
      libtorch_runs.push_back(
          measureLoad(bench::ServerKind::Libtorch, config, scratch, options, clients, context));
    }
    bench::LoadComparison row;
    row.ddprund = medianRun(ddprund_runs);
    row.libtorch = medianRun(libtorch_runs);
    rows.push_back(row);
  }
  // Says how the largest point fits: a 1.13 client object holds two sockets
  // and its own callback thread.
  if (!rows.empty()) {
    const bench::LoadResult& largest = rows.back().libtorch;
    context.notes.push_back(std::to_string(largest.clients) + " clients: store_bench held " +
                            std::to_string(largest.threads) + " threads and " +
                            std::to_string(largest.open_fds) + " fds once all had connected");
  }
  return rows;
}

bench::RawLoadResult measureRaw(bench::ServerKind kind, const bench::ServerConfig& config,
                                const bench::TempDir& scratch, const BenchOptions& options,
                                int connections, bench::ReportContext& context) {
  std::cerr << "store_bench: raw load, " << connections << " connections against "
            << bench::serverName(kind) << "..." << std::endl;
  bench::Watchdog watchdog("the raw load point against " + bench::serverName(kind),
                           toMs(options.warmup_s + options.duration_s) + milliseconds(60000));
  bench::RunningServer server(kind, config, scratch);
  bench::RawLoadOptions raw;
  raw.port = server.port();
  raw.connections = connections;
  raw.warmup = toMs(options.warmup_s);
  raw.duration = toMs(options.duration_s);
  raw.server_cpu_seconds = [&server] { return server.cpuSeconds(); };
  bench::RawLoadResult result = bench::runRawLoad(raw);
  server.stop();
  if (!result.ok()) {
    context.notes.push_back(bench::serverName(kind) + " raw load, " + std::to_string(connections) +
                            " connections: " + result.error);
  }
  return result;
}

std::vector<bench::RawComparison> runRawPoints(const bench::ServerConfig& config,
                                               const bench::TempDir& scratch,
                                               const BenchOptions& options,
                                               bench::ReportContext& context) {
  std::vector<bench::RawComparison> rows;
  for (int connections : options.clients) {
    bench::RawComparison row;
    row.ddprund =
        measureRaw(bench::ServerKind::Ddprund, config, scratch, options, connections, context);
    row.libtorch =
        measureRaw(bench::ServerKind::Libtorch, config, scratch, options, connections, context);
    rows.push_back(row);
  }
  return rows;
}

bench::BarrierResult measureBarrier(bench::ServerKind kind, const bench::ServerConfig& config,
                                    const bench::TempDir& scratch, const BenchOptions& options,
                                    bench::ReportContext& context) {
  std::cerr << "store_bench: " << options.barrier_clients << "-connection barrier against "
            << bench::serverName(kind) << "..." << std::endl;
  bench::Watchdog watchdog("the barrier against " + bench::serverName(kind),
                           2 * toMs(options.barrier_timeout_s) + milliseconds(60000));
  bench::RunningServer server(kind, config, scratch);
  bench::BarrierOptions barrier;
  barrier.port = server.port();
  barrier.connections = options.barrier_clients;
  barrier.connect_window = options.barrier_window;
  barrier.source_addresses = options.barrier_sources;
  barrier.connect_timeout = toMs(options.barrier_timeout_s);
  barrier.barrier_timeout = toMs(options.barrier_timeout_s);
  barrier.server_cpu_seconds = [&server] { return server.cpuSeconds(); };
  bench::BarrierResult result = bench::runBarrier(barrier);
  const std::string exit_status = server.stop();
  if (!result.error.empty()) {
    context.notes.push_back(bench::serverName(kind) + " barrier: " + result.error);
  }
  if (exit_status != "exit 0") {
    context.notes.push_back(bench::serverName(kind) + " barrier: server " + exit_status +
                            " on SIGTERM");
  }
  return result;
}

std::string describeSetup(const BenchOptions& options, std::uint64_t fd_limit) {
  std::ostringstream out;
  out << "LibTorch 1.13 c10d::TCPStore clients, one per thread; 25% each set/get/add/check on "
         "the client's own keys, 64-byte values; get = WAIT+GET on the wire. "
      << options.warmup_s << " s warm-up, " << options.duration_s << " s measured per point"
      << (options.repeat > 1 ? ", median of " + std::to_string(options.repeat) + " runs" : "")
      << "; ddprund --threads " << options.ddprund_threads << "; "
      << std::thread::hardware_concurrency() << " CPUs shared by the server and the clients; "
      << "fd limit " << fd_limit << "; 1-minute load average before the run " << std::fixed
      << std::setprecision(2) << bench::loadAverage() << ".";
  return out.str();
}

}  // namespace

int main(int argc, char** argv) try {
  BenchOptions options;
  options.ddprund = defaultDdprund();
  options.libtorch_server = (bench::selfDirectory() / "libtorch_store_server").string();
  CLI::App app{"Compares ddprund with LibTorch's TCPStore server under the same load"};
  addOptions(app, options);
  CLI11_PARSE(app, argc, argv);

  // A server that dies mid-run must show up as an error, not kill us.
  ::signal(SIGPIPE, SIG_IGN);
  // Children inherit the raised limit, so both servers can hold the barrier.
  const std::uint64_t fd_limit = bench::raiseFdLimit();
  const bench::ServerConfig config{options.ddprund, options.libtorch_server,
                                   options.ddprund_threads};
  const bench::TempDir scratch;
  bench::ReportContext context;
  context.setup = describeSetup(options, fd_limit);

  std::vector<bench::LoadComparison> rows;
  if (!options.skip_load) {
    rows = runLoadPoints(config, scratch, options, context);
  }
  std::vector<bench::RawComparison> raw_rows;
  if (options.raw_load) {
    raw_rows = runRawPoints(config, scratch, options, context);
  }
  bench::BarrierComparison barrier;
  if (!options.skip_barrier) {
    barrier.ddprund = measureBarrier(bench::ServerKind::Ddprund, config, scratch, options, context);
    barrier.libtorch =
        measureBarrier(bench::ServerKind::Libtorch, config, scratch, options, context);
  }

  std::cout << "\n" << context.setup << "\n\n";
  if (!options.skip_load) {
    bench::printLoadTable(std::cout, rows);
  }
  if (!options.skip_load && options.detail) {
    std::cout << "\n";
    bench::printLoadDetail(std::cout, rows);
  }
  if (options.raw_load) {
    std::cout << "\nThe same mix and bytes from one epoll thread (one send + one recv per round "
                 "trip), one connection per simulated client:\n\n";
    bench::printRawTable(std::cout, raw_rows);
  }
  if (!options.skip_barrier) {
    std::cout << "\n";
    bench::printBarrierTable(std::cout, barrier);
  }
  bench::printNotes(std::cout, context);
  return 0;
} catch (const std::exception& error) {
  std::cerr << "store_bench: " << error.what() << '\n';
  return 1;
}

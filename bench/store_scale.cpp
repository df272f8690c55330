// store_scale's runs: for each barrier, load point and connection count, a
// fresh server child, the load, the server's exit; then the tables.
#include "store_scale.hpp"

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <string>
#include <vector>

#include "connection_limits.hpp"
#include "ddprun/test_support/fd_limit.hpp"
#include "ddprun/test_support/temp_dir.hpp"
#include "raw_load.hpp"
#include "servers.hpp"
#include "store_scale_report.hpp"
#include "watchdog.hpp"

namespace ddprun::bench {
namespace {

using std::chrono::milliseconds;

milliseconds toMs(double seconds) { return milliseconds(static_cast<long long>(seconds * 1000)); }

// What every run of one runStoreScale call shares.
struct ScaleContext {
  ScaleContext(const StoreScaleOptions& opts, test_support::FdLimit limit)
      : options(opts),
        config{opts.ddprund,         opts.libtorch_server, opts.echo_floor,
               opts.ddprund_threads, "127.0.0.1",          {}},
        fd_limit(limit),
        fit(connectionsThatFit(limit)) {}

  // Why `connections` cannot be run here, or empty.
  std::string tooMany(int connections) const {
    if (connections <= fit) {
      return "";
    }
    return "needs " + std::to_string(connections + kFdsBesideConnections) +
           " fds per process; the fd limit is " + std::to_string(fd_limit.soft) +
           (fd_limit.hard_refused
                ? " and raising the hard limit was refused (needs root with CAP_SYS_RESOURCE)"
                : "");
  }

  const StoreScaleOptions& options;
  ServerConfig config;
  test_support::FdLimit fd_limit;
  int fit;  // the most connections both ends can hold
  test_support::TempDir scratch{"store_scale"};
  std::vector<std::string> notes;

  void noteExit(const std::string& where, const std::string& exit_status) {
    if (exit_status != "exit 0") {
      notes.push_back(where + ": server " + exit_status + " on SIGTERM");
    }
  }
};

BarrierResult measureBarrier(ServerKind kind, BarrierBytes bytes, int connections,
                             ScaleContext& context) {
  const StoreScaleOptions& options = context.options;
  const std::string where = serverName(kind) + ", " + std::to_string(connections) +
                            "-connection barrier, " + barrierBytesName(bytes) + " bytes";
  std::cerr << "store_scale: " << where << "..." << std::endl;
  // Two bounded phases, the server's start and stop, plus slack.
  Watchdog watchdog(where, 2 * toMs(options.barrier_timeout_s) + milliseconds(90000));
  RunningServer server(kind, context.config, context.scratch);
  BarrierOptions barrier;
  barrier.port = server.port();
  barrier.connections = connections;
  barrier.bytes = bytes;
  barrier.connect_window = options.barrier_window;
  barrier.source_addresses = options.barrier_sources;
  barrier.connect_timeout = toMs(options.barrier_timeout_s);
  barrier.barrier_timeout = toMs(options.barrier_timeout_s);
  barrier.server_pid = server.pid();
  BarrierResult result = runBarrier(barrier);
  context.noteExit(where, server.stop());
  return result;
}

// Each server and request bytes at the asked count; where the fd limit is
// too low for it, a row saying so and a run at the most that fits.
std::vector<BarrierRow> runBarriers(ScaleContext& context) {
  std::vector<BarrierRow> rows;
  const int asked = context.options.barrier_connections;
  const std::string too_many = context.tooMany(asked);
  for (ServerKind kind : {ServerKind::Ddprund, ServerKind::Libtorch}) {
    const std::string missing = serverMissing(kind, context.config);
    for (BarrierBytes bytes : context.options.barrier_bytes) {
      BarrierRow row{serverName(kind), bytes, {}, missing};
      row.result.connections = asked;
      if (row.not_run.empty() && kind == ServerKind::Libtorch && bytes == BarrierBytes::Torch2x) {
        row.not_run = "LibTorch 1.13's server speaks only the 1.13 bytes";
      }
      if (row.not_run.empty() && !too_many.empty()) {
        rows.push_back({row.server, bytes, row.result, too_many});
        row.result.connections = context.fit;
      }
      if (row.not_run.empty() && row.result.connections > 0) {
        row.result = measureBarrier(kind, bytes, row.result.connections, context);
      }
      rows.push_back(std::move(row));
    }
  }
  return rows;
}

RawLoadResult measureRaw(ServerKind kind, int connections, ScaleContext& context) {
  const StoreScaleOptions& options = context.options;
  const std::string where =
      serverName(kind) + ", raw load, " + std::to_string(connections) + " connections";
  std::cerr << "store_scale: " << where << "..." << std::endl;
  Watchdog watchdog(where, toMs(options.warmup_s + options.duration_s) + milliseconds(60000));
  RunningServer server(kind, context.config, context.scratch);
  RawLoadOptions raw;
  raw.port = server.port();
  raw.connections = connections;
  raw.warmup = toMs(options.warmup_s);
  raw.duration = toMs(options.duration_s);
  raw.server_cpu_seconds = [&server] { return server.cpuSeconds(); };
  RawLoadResult result = runRawLoad(raw);
  if (!result.ok()) {
    context.notes.push_back(where + ": " + result.error);
  }
  context.noteExit(where, server.stop());
  return result;
}

// One more run of `kind` into `server`, unless its program is missing.
void measureRawInto(ServerRuns& server, ServerKind kind, int connections, ScaleContext& context) {
  if (server.missing.empty()) {
    server.runs.push_back(measureRaw(kind, connections, context));
  }
}

std::vector<CpuPerOpRow> runCpuPerOp(ScaleContext& context) {
  std::vector<CpuPerOpRow> rows;
  for (int connections : context.options.cpu_connections) {
    CpuPerOpRow row;
    row.connections = connections;
    row.libtorch.missing = serverMissing(ServerKind::Libtorch, context.config);
    row.echo_floor.missing = serverMissing(ServerKind::EchoFloor, context.config);
    // Alternating the servers spreads other users' load on the machine evenly.
    for (int run = 0; run < std::max(1, context.options.repeat); ++run) {
      measureRawInto(row.ddprund, ServerKind::Ddprund, connections, context);
      measureRawInto(row.libtorch, ServerKind::Libtorch, connections, context);
      measureRawInto(row.echo_floor, ServerKind::EchoFloor, connections, context);
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

// ddprund at each count, 2.x bytes; a count the barrier table already ran is
// reused rather than run twice. Counts over the fd limit get a row saying
// so, and the most that fits gets a row of its own.
std::vector<BarrierRow> runGrowth(const std::vector<BarrierRow>& barriers, ScaleContext& context) {
  std::vector<int> counts = context.options.growth;
  if (std::any_of(counts.begin(), counts.end(), [&](int n) { return n > context.fit; }) &&
      std::find(counts.begin(), counts.end(), context.fit) == counts.end()) {
    counts.push_back(context.fit);
  }
  std::sort(counts.begin(), counts.end());
  std::vector<BarrierRow> rows;
  const std::string ddprund = serverName(ServerKind::Ddprund);
  for (int connections : counts) {
    BarrierRow row{ddprund, BarrierBytes::Torch2x, {}, context.tooMany(connections)};
    row.result.connections = connections;
    auto measured = std::find_if(barriers.begin(), barriers.end(), [&](const BarrierRow& b) {
      return b.server == ddprund && b.bytes == BarrierBytes::Torch2x && b.not_run.empty() &&
             b.result.connections == connections;
    });
    if (row.not_run.empty()) {
      row.result =
          measured != barriers.end()
              ? measured->result
              : measureBarrier(ServerKind::Ddprund, BarrierBytes::Torch2x, connections, context);
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

int largestConnectionCount(const StoreScaleOptions& options) {
  int largest = options.barrier_bytes.empty() ? 0 : options.barrier_connections;
  for (const auto* counts : {&options.cpu_connections, &options.growth}) {
    for (int count : *counts) {
      largest = std::max(largest, count);
    }
  }
  return largest;
}

void printNotes(std::ostream& out, const std::vector<std::string>& notes) {
  if (notes.empty()) {
    return;
  }
  out << "\nNotes:\n";
  for (const auto& note : notes) {
    out << "- " << note << '\n';
  }
}

}  // namespace

void runStoreScale(const StoreScaleOptions& options, std::ostream& out) {
  // A server that dies mid-run must show up as an error, not kill us.
  ::signal(SIGPIPE, SIG_IGN);
  // This process holds one end of every connection, the server the other;
  // the server inherits the limit raised here.
  const int largest = largestConnectionCount(options);
  const std::uint64_t needed = static_cast<std::uint64_t>(largest) + kFdsBesideConnections;
  ScaleContext context(options, test_support::raiseFdLimit(needed));
  std::vector<BarrierRow> barriers;
  if (!options.barrier_bytes.empty()) {
    barriers = runBarriers(context);
  }
  const std::vector<CpuPerOpRow> cpu_rows = runCpuPerOp(context);
  const std::vector<BarrierRow> growth = runGrowth(barriers, context);

  out << "\nStore at scale: one epoll client thread in this process, each server a fresh child "
         "on loopback; ddprund --threads "
      << options.ddprund_threads << "; " << describeConnectionLimits() << ".\n";
  if (!barriers.empty()) {
    out << "\n";
    printBarrierScaleTable(out, barriers);
    printExtrapolation(out, barriers, options.barrier_connections);
  }
  if (!cpu_rows.empty()) {
    out << "\n";
    printCpuPerOpTable(out, cpu_rows);
  }
  if (!growth.empty()) {
    out << "\n";
    printGrowthTable(out, growth);
  }
  printNotes(out, context.notes);
}

}  // namespace ddprun::bench

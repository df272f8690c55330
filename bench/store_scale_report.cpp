#include "store_scale_report.hpp"

#include <algorithm>

#include "format.hpp"

namespace ddprun::bench {
namespace {

// 100000 -> "100,000": the tables' counts are read by people.
std::string grouped(long long value) {
  std::string digits = std::to_string(value);
  for (int i = static_cast<int>(digits.size()) - 3; i > (value < 0 ? 1 : 0); i -= 3) {
    digits.insert(static_cast<std::size_t>(i), ",");
  }
  return digits;
}

std::string verdict(bool met) { return met ? " (met)" : " (not met)"; }

double mib(std::size_t kib) { return static_cast<double>(kib) / 1024.0; }

std::string connectCell(const BarrierResult& r) {
  if (r.allConnected()) {
    return formatNumber("%.3f", r.connect_seconds);
  }
  return r.error.empty() ? "–" : r.error;
}

std::string barrierCell(const BarrierResult& r) {
  if (r.allReleased()) {
    return formatNumber("%.3f", r.barrier_seconds);
  }
  return r.allConnected() && !r.error.empty() ? r.error : "–";
}

std::string totalCell(const BarrierResult& r) {
  if (!r.allReleased()) {
    return "–";
  }
  return formatNumber("%.3f", r.total_seconds) + verdict(r.total_seconds < kBarrierTargetSeconds);
}

std::string answeredCell(const BarrierResult& r) {
  if (r.allReleased()) {
    return "yes, " + grouped(r.released);
  }
  return "no: " + grouped(r.released) + " of " + grouped(r.connections);
}

std::string peakCell(const BarrierResult& r, bool with_target) {
  if (r.peak_rss_kib == 0) {
    return "–";
  }
  const std::string figure = formatNumber("%.1f", mib(r.peak_rss_kib));
  return with_target ? figure + verdict(mib(r.peak_rss_kib) < kServerRssTargetMiB) : figure;
}

std::string perConnectionCell(const BarrierResult& r) {
  const double bytes = r.rssPerConnectionBytes();
  return bytes > 0 ? grouped(static_cast<long long>(bytes + 0.5)) : "–";
}

// A median figure and the spread of every run's, e.g. "6.62 (6.41–6.90)".
std::string cpuPerOpCell(const std::vector<RawLoadResult>& runs, const RawLoadResult& median) {
  if (!median.ok()) {
    return "failed";
  }
  double low = median.serverCpuPerOpUs(), high = low;
  for (const auto& run : runs) {
    if (run.ok()) {
      low = std::min(low, run.serverCpuPerOpUs());
      high = std::max(high, run.serverCpuPerOpUs());
    }
  }
  std::string cell = formatNumber("%.2f", median.serverCpuPerOpUs());
  if (runs.size() > 1) {
    cell += " (" + formatNumber("%.2f", low) + "–" + formatNumber("%.2f", high) + ")";
  }
  return cell;
}

std::string okCell(const RawLoadResult& r, const char* pattern, double value) {
  return r.ok() ? formatNumber(pattern, value) : "failed";
}

// One figure of a server's median run; where it was not run, the first
// column of its figures says why and the others stay empty.
std::string figureCell(const ServerRuns& server, const char* pattern, double RawLoadResult::*figure,
                       bool says_why = false) {
  if (!server.missing.empty()) {
    return says_why ? "not run: " + server.missing : "–";
  }
  const RawLoadResult median = medianByCpuPerOp(server.runs);
  return okCell(median, pattern, median.*figure);
}

std::string cpuCell(const ServerRuns& server) {
  return server.missing.empty() ? cpuPerOpCell(server.runs, medianByCpuPerOp(server.runs)) : "–";
}

// ddprund's CPU per operation over another server's, beside its target.
std::string cpuRatioCell(const ServerRuns& ddprund, const ServerRuns& other, double target) {
  if (!other.missing.empty()) {
    return "–";
  }
  const RawLoadResult d = medianByCpuPerOp(ddprund.runs);
  const RawLoadResult o = medianByCpuPerOp(other.runs);
  if (!d.ok() || !o.ok() || o.serverCpuPerOpUs() <= 0) {
    return "–";
  }
  const double ratio = d.serverCpuPerOpUs() / o.serverCpuPerOpUs();
  return formatNumber("%.2f", ratio) + verdict(ratio <= target);
}

}  // namespace

RawLoadResult medianByCpuPerOp(std::vector<RawLoadResult> runs) {
  if (runs.empty()) {
    return {};
  }
  // Failed runs sort first, so a majority of good runs still yields one.
  std::sort(runs.begin(), runs.end(), [](const auto& a, const auto& b) {
    return std::make_pair(a.ok(), a.serverCpuPerOpUs()) <
           std::make_pair(b.ok(), b.serverCpuPerOpUs());
  });
  return runs[runs.size() / 2];
}

void printBarrierScaleTable(std::ostream& out, const std::vector<BarrierRow>& rows) {
  out << "ADD+WAIT barrier, every connection first connected (and its probe answered: CHECK [] "
         "in 1.13 bytes, VALIDATE+PING in 2.x bytes), then ADD \"barrier\" +1 and WAIT "
         "[\"go\"]; the last ADD also SETs \"go\". Total = first connect to last STOP_WAITING "
         "received; RSS per connection = (server VmRSS once all connected − before) / "
         "connections:\n\n";
  out << "| Server | Request bytes | Connections | Connect, s | Barrier, s (first ADD → last "
         "STOP_WAITING) | Total, s (target < "
      << formatNumber("%.0f", kBarrierTargetSeconds)
      << ") | Every client answered (target: all) | Server peak RSS, MiB (target < "
      << formatNumber("%.0f", kServerRssTargetMiB)
      << ") | RSS per connection, bytes | Server CPU, s | Client CPU, s | Source addresses | "
         "Other processes' CPU, cores |\n";
  out << "|---|---|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|\n";
  for (const auto& row : rows) {
    const BarrierResult& r = row.result;
    out << "| " << row.server << " | " << barrierBytesName(row.bytes) << " | ";
    if (!row.not_run.empty()) {
      out << (r.connections > 0 ? grouped(r.connections) : "–") << " | not run: " << row.not_run
          << " | – | – | – | – | – | – | – | – | – |\n";
      continue;
    }
    out << grouped(r.connections) << " | " << connectCell(r) << " | " << barrierCell(r) << " | "
        << totalCell(r) << " | " << answeredCell(r) << " | " << peakCell(r, true) << " | "
        << perConnectionCell(r) << " | " << formatNumber("%.2f", r.server_cpu_seconds) << " | "
        << formatNumber("%.2f", r.client_cpu_seconds) << " | " << r.source_addresses << " | "
        << formatNumber("%.2f", r.other_cpu) << " |\n";
  }
}

void printCpuPerOpTable(std::ostream& out, const std::vector<CpuPerOpRow>& rows) {
  out << "The server's own CPU per operation (its user + system CPU seconds from /proc over the "
         "measured window, ÷ round trips), under the raw load: one epoll client thread, one "
         "connection per simulated client, LibTorch 1.13's bytes for set/get/add/check. The "
         "echo floor is a single-threaded epoll server that answers each request with a reply "
         "of the right shape and does nothing else (one recv, one send per round trip): what "
         "the kernel alone charges a server. The median run by CPU per operation, with every "
         "run's range:\n\n";
  out << "| Connections | ddprund ops/s | LibTorch ops/s | echo floor ops/s | ddprund p99 µs "
         "| LibTorch p99 µs | echo floor p99 µs | ddprund server CPU per op, µs | LibTorch "
         "server CPU per op, µs | echo floor server CPU per op, µs | ddprund / LibTorch "
         "(target ≤ "
      << formatNumber("%.2f", kCpuPerOpTargetRatio) << ") | ddprund / echo floor (target ≤ "
      << formatNumber("%.2f", kCpuPerOpFloorRatio) << ") |\n";
  out << "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  const auto ops = &RawLoadResult::ops_per_second;
  const auto p99 = &RawLoadResult::p99_us;
  for (const auto& row : rows) {
    out << "| " << row.connections;
    for (const ServerRuns* server : {&row.ddprund, &row.libtorch, &row.echo_floor}) {
      out << " | " << figureCell(*server, "%.0f", ops, /*says_why=*/true);
    }
    for (const ServerRuns* server : {&row.ddprund, &row.libtorch, &row.echo_floor}) {
      out << " | " << figureCell(*server, "%.0f", p99);
    }
    for (const ServerRuns* server : {&row.ddprund, &row.libtorch, &row.echo_floor}) {
      out << " | " << cpuCell(*server);
    }
    out << " | " << cpuRatioCell(row.ddprund, row.libtorch, kCpuPerOpTargetRatio) << " | "
        << cpuRatioCell(row.ddprund, row.echo_floor, kCpuPerOpFloorRatio) << " |\n";
  }
}

void printExtrapolation(std::ostream& out, const std::vector<BarrierRow>& rows, int asked) {
  for (const auto& row : rows) {
    const BarrierResult& r = row.result;
    if (row.server != "ddprund" || !row.not_run.empty() || r.connections >= asked ||
        !r.allReleased() || r.rssPerConnectionBytes() <= 0) {
      continue;
    }
    const double scale = static_cast<double>(asked) / r.connections;
    const double rss_mib =
        mib(r.rss_before_kib) + r.rssPerConnectionBytes() * asked / (1024.0 * 1024.0);
    out << "\nEstimate, not a measurement: ddprund's " << barrierBytesName(row.bytes)
        << " run scaled linearly from " << grouped(r.connections) << " to " << grouped(asked)
        << " connections gives a total of " << formatNumber("%.1f", r.total_seconds * scale) << " s"
        << verdict(r.total_seconds * scale < kBarrierTargetSeconds) << " and "
        << formatNumber("%.0f", rss_mib) << " MiB of RSS" << verdict(rss_mib < kServerRssTargetMiB)
        << "; server and clients together needed "
        << formatNumber("%.1f", (r.server_cpu_seconds + r.client_cpu_seconds) * scale)
        << " CPU seconds for it, while other processes kept " << formatNumber("%.2f", r.other_cpu)
        << " cores busy.\n";
  }
}

void printGrowthTable(std::ostream& out, const std::vector<BarrierRow>& rows) {
  out << "ddprund's cost as store clients grow: the same barrier in 2.x bytes, a fresh ddprund "
         "per row:\n\n";
  out << "| Connections | Connect, s | Barrier, s | Total, s | Every client answered "
         "| Peak RSS, MiB | RSS per connection, bytes | Server CPU, s | Server CPU per "
         "connection, µs | Client CPU, s | Other processes' CPU, cores |\n";
  out << "|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|\n";
  for (const auto& row : rows) {
    const BarrierResult& r = row.result;
    if (!row.not_run.empty()) {
      out << "| " << grouped(r.connections) << " | not run: " << row.not_run
          << " | – | – | – | – | – | – | – | – | – |\n";
      continue;
    }
    const double per_connection =
        r.connections > 0 ? r.server_cpu_seconds / r.connections * 1e6 : 0.0;
    out << "| " << grouped(r.connections) << " | " << connectCell(r) << " | " << barrierCell(r)
        << " | " << (r.allReleased() ? formatNumber("%.3f", r.total_seconds) : "–") << " | "
        << answeredCell(r) << " | " << peakCell(r, false) << " | " << perConnectionCell(r) << " | "
        << formatNumber("%.2f", r.server_cpu_seconds) << " | "
        << formatNumber("%.1f", per_connection) << " | "
        << formatNumber("%.2f", r.client_cpu_seconds) << " | " << formatNumber("%.2f", r.other_cpu)
        << " |\n";
  }
}

}  // namespace ddprun::bench

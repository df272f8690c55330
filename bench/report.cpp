#include "report.hpp"

#include <cstdio>
#include <cstdlib>

#include "format.hpp"

namespace ddprun::bench {
namespace {

std::string opsCell(const LoadResult& result) {
  return result.ok() ? formatNumber("%.0f", result.ops_per_second) : "failed";
}

std::string usCell(const LoadResult& result, double value) {
  return result.ok() ? formatNumber("%.0f", value) : "–";
}

// ddprund relative to libtorch; "–" when either side has no figure.
std::string ratioCell(const LoadResult& ddprund, const LoadResult& libtorch, double numerator,
                      double denominator) {
  if (!ddprund.ok() || !libtorch.ok() || denominator <= 0) {
    return "–";
  }
  return formatNumber("%.2f×", numerator / denominator);
}

std::string cpuCell(double ddprund, double libtorch) {
  return formatNumber("%.2f", ddprund) + " / " + formatNumber("%.2f", libtorch);
}

// The server's CPU seconds over the window per operation, in µs.
double cpuPerOpUs(const LoadResult& result) {
  return result.ok() ? result.server_cpu / result.ops_per_second * 1e6 : 0.0;
}

}  // namespace

void printLoadTable(std::ostream& out, const std::vector<LoadComparison>& rows) {
  out << "| Clients | ddprund ops/s | libtorch ops/s | Throughput ddprund/libtorch "
         "| ddprund p50 µs | libtorch p50 µs | ddprund p99 µs | libtorch p99 µs "
         "| p99 ddprund/libtorch | Server CPU, cores (ddprund / libtorch) "
         "| Client CPU, cores (ddprund / libtorch) | Other processes' CPU, cores (ddprund / "
         "libtorch) | Server CPU per op, µs (ddprund / libtorch) | Server CPU per op "
         "ddprund/libtorch (target ≤ 0.50) |\n";
  out << "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const auto& row : rows) {
    const auto& d = row.ddprund;
    const auto& l = row.libtorch;
    out << "| " << d.clients << " | " << opsCell(d) << " | " << opsCell(l) << " | "
        << ratioCell(d, l, d.ops_per_second, l.ops_per_second) << " | " << usCell(d, d.p50_us)
        << " | " << usCell(l, l.p50_us) << " | " << usCell(d, d.p99_us) << " | "
        << usCell(l, l.p99_us) << " | " << ratioCell(d, l, d.p99_us, l.p99_us) << " | "
        << cpuCell(d.server_cpu, l.server_cpu) << " | " << cpuCell(d.bench_cpu, l.bench_cpu)
        << " | " << cpuCell(d.other_cpu, l.other_cpu) << " | "
        << cpuCell(cpuPerOpUs(d), cpuPerOpUs(l)) << " | "
        << ratioCell(d, l, cpuPerOpUs(d), cpuPerOpUs(l)) << " |\n";
  }
}

void printLoadDetail(std::ostream& out, const std::vector<LoadComparison>& rows) {
  out << "| Clients | Server | p50 µs | p90 µs | p99 µs | p99.9 µs | max µs "
         "| ops per client, min – max | Setup s (all connected + 1 round trip each) |\n";
  out << "|---:|---|---:|---:|---:|---:|---:|---:|---:|\n";
  auto line = [&](const char* name, const LoadResult& r) {
    out << "| " << r.clients << " | " << name << " | " << usCell(r, r.p50_us) << " | "
        << usCell(r, r.p90_us) << " | " << usCell(r, r.p99_us) << " | " << usCell(r, r.p999_us)
        << " | " << usCell(r, r.max_us) << " | " << r.min_client_ops << " – " << r.max_client_ops
        << " | " << formatNumber("%.2f", r.setup_seconds) << " |\n";
  };
  for (const auto& row : rows) {
    line("ddprund", row.ddprund);
    line("libtorch", row.libtorch);
  }
}

void printNotes(std::ostream& out, const ReportContext& context) {
  if (context.notes.empty()) {
    return;
  }
  out << "\nNotes:\n";
  for (const auto& note : context.notes) {
    out << "- " << note << '\n';
  }
}

double loadAverage() {
  double load[1] = {0.0};
  return ::getloadavg(load, 1) == 1 ? load[0] : 0.0;
}

}  // namespace ddprun::bench

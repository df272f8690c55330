#include "launch_report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "format.hpp"

namespace ddprun::bench {
namespace {

constexpr double kLaunchTargetRatio = 50.0;
constexpr double kRestartTargetMs = 50.0;
constexpr double kRssTargetBytes = 10e6;  // 10 MB, decimal: the stricter reading
constexpr double kPssTargetMiB = 8.0;

// A figure, or why there is none.
std::string cell(const Samples& samples, double value, const char* pattern = "%.1f") {
  if (samples.empty()) {
    return samples.failures() > 0 ? "failed" : "–";
  }
  return formatNumber(pattern, value);
}

// How many times ddprun's figure fits in torchrun's: > 1 means ddprun is
// faster (or smaller).
double ratio(double torchrun, double ddprun) { return ddprun > 0 ? torchrun / ddprun : 0.0; }

std::string ratioCell(const Samples& ddprun, const Samples& torchrun, double d, double t) {
  if (ddprun.empty() || torchrun.empty() || d <= 0) {
    return "–";
  }
  return formatNumber("%.1f×", ratio(t, d));
}

void printTimeRow(std::ostream& out, const Comparison& row) {
  const Samples& d = row.ddprun;
  const Samples& t = row.torchrun;
  out << "| " << row.label << " | " << cell(d, d.median()) << " | " << cell(d, d.p90()) << " | "
      << cell(t, t.median()) << " | " << cell(t, t.p90()) << " | "
      << ratioCell(d, t, d.median(), t.median()) << " | " << ratioCell(d, t, d.p90(), t.p90())
      << " | " << formatNumber("%.2f", row.other_cores) << " |\n";
}

void printTimeHeader(std::ostream& out, const char* first_column) {
  out << "| " << first_column
      << " | ddprun median ms | ddprun p90 ms | torchrun median ms | torchrun p90 ms "
         "| torchrun / ddprun (median) | torchrun / ddprun (p90) "
         "| Other processes' CPU, cores |\n"
      << "|---|---:|---:|---:|---:|---:|---:|---:|\n";
}

void printRestartDetail(std::ostream& out, const std::vector<RestartComparison>& rows) {
  out << "| Workers | Launcher | crash → first survivor gets SIGTERM, median ms "
         "| crash → first replacement runs, median ms | crash → last replacement runs, "
         "median ms |\n"
      << "|---|---|---:|---:|---:|\n";
  auto line = [&out](const RestartComparison& row, const char* name, auto member) {
    const Samples& told = row.survivors_told.*member;
    const Samples& first = row.first_started.*member;
    const Samples& all = row.all_started.*member;
    out << "| " << row.label << " | " << name << " | " << cell(told, told.median()) << " | "
        << cell(first, first.median()) << " | " << cell(all, all.median()) << " |\n";
  };
  for (const auto& row : rows) {
    line(row, "ddprun", &Comparison::ddprun);
    line(row, "torchrun", &Comparison::torchrun);
  }
}

// A launcher's largest figure, in MiB and KiB.
std::string memoryCells(const Samples& samples) {
  return cell(samples, samples.max() / 1024.0, "%.2f") + " | " +
         cell(samples, samples.max(), "%.0f");
}

void printMemory(std::ostream& out, const Comparison& rss, const Comparison& pss) {
  const int runs = std::max(rss.ddprun.count(), rss.torchrun.count());
  out << "| Launcher | Agent VmHWM, MiB (largest of " << runs
      << " runs) | KiB | Agent PSS, MiB (largest of " << runs << " runs) | KiB |\n"
      << "|---|---:|---:|---:|---:|\n";
  out << "| ddprun | " << memoryCells(rss.ddprun) << " | " << memoryCells(pss.ddprun) << " |\n";
  out << "| torchrun (the Python agent) | " << memoryCells(rss.torchrun) << " | "
      << memoryCells(pss.torchrun) << " |\n";
  out << "| torchrun / ddprun | "
      << ratioCell(rss.ddprun, rss.torchrun, rss.ddprun.max(), rss.torchrun.max()) << " | | "
      << ratioCell(pss.ddprun, pss.torchrun, pss.ddprun.max(), pss.torchrun.max()) << " | |\n";
  out << "\nOther processes' CPU meanwhile: " << formatNumber("%.2f", rss.other_cores)
      << " cores.\n";
}

std::string metCell(bool measured, bool met) {
  if (!measured) {
    return "not measured";
  }
  return met ? "yes" : "no";
}

void printTargets(std::ostream& out, const LaunchReport& report) {
  out << "| Target | Measured | Met? |\n|---|---|---|\n";
  for (const auto& row : report.launch) {
    const bool measured = !row.ddprun.empty() && !row.torchrun.empty();
    const double times = measured ? ratio(row.torchrun.median(), row.ddprun.median()) : 0.0;
    out << "| launch ≥ " << formatNumber("%.0f", kLaunchTargetRatio) << "× faster than torchrun, "
        << row.label << " | " << (measured ? formatNumber("%.1f× (median)", times) : "–") << " | "
        << metCell(measured, times >= kLaunchTargetRatio) << " |\n";
  }
  for (const auto& row : report.restart) {
    const Samples& d = row.all_started.ddprun;
    out << "| restart ≤ " << formatNumber("%.0f", kRestartTargetMs) << " ms, " << row.label << " | "
        << (d.empty() ? "–"
                      : formatNumber("median %.1f ms", d.median()) +
                            formatNumber(", p90 %.1f ms", d.p90()))
        << " | " << metCell(!d.empty(), !d.empty() && d.median() <= kRestartTargetMs) << " |\n";
  }
  const Samples& rss = report.peak_rss.ddprun;
  const double bytes = rss.empty() ? 0.0 : rss.max() * 1024.0;
  out << "| agent peak RSS ≤ 10 MB | "
      << (rss.empty()
              ? "–"
              : formatNumber("%.1f MB", bytes / 1e6) + formatNumber(" (%.2f MiB)", bytes / 1048576))
      << " | " << metCell(!rss.empty(), bytes <= kRssTargetBytes) << " |\n";
  const Samples& pss = report.peak_pss.ddprun;
  const double pss_mib = pss.max() / 1024.0;
  out << "| agent PSS ≤ " << formatNumber("%.0f MiB", kPssTargetMiB) << " | "
      << (pss.empty() ? "–" : formatNumber("%.2f MiB", pss_mib)) << " | "
      << metCell(!pss.empty(), pss_mib <= kPssTargetMiB) << " |\n";
}

}  // namespace

double Samples::median() const {
  if (values_.empty()) {
    return 0.0;
  }
  auto sorted = values_;
  std::sort(sorted.begin(), sorted.end());
  const std::size_t mid = sorted.size() / 2;
  return sorted.size() % 2 == 1 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2.0;
}

double Samples::p90() const {
  if (values_.empty()) {
    return 0.0;
  }
  auto sorted = values_;
  std::sort(sorted.begin(), sorted.end());
  const auto rank = static_cast<std::size_t>(std::ceil(0.9 * static_cast<double>(sorted.size())));
  return sorted[std::max<std::size_t>(rank, 1) - 1];
}

double Samples::max() const {
  return values_.empty() ? 0.0 : *std::max_element(values_.begin(), values_.end());
}

void printLaunchReport(std::ostream& out, const LaunchReport& report) {
  out << "\n" << report.setup << "\n";
  out << "\nLaunch: launcher started → launcher exited, every worker run to completion:\n\n";
  printTimeHeader(out, "Workers");
  for (const auto& row : report.launch) {
    printTimeRow(out, row);
  }
  out << "\nRestart: rank 0 crashes (its stamp right before exit(1)) → the last replacement "
         "worker has entered main:\n\n";
  printTimeHeader(out, "Workers");
  for (const auto& row : report.restart) {
    printTimeRow(out, row.all_started);
  }
  out << "\n";
  printRestartDetail(out, report.restart);
  out << "\nAgent memory, read from /proc every millisecond from the moment every worker is "
         "up until the launcher exits: peak RSS (VmHWM of the launcher process, for ddprun its "
         "guardian and its agent added, so the pages they share count twice) and PSS (Pss of "
         "smaps_rollup, each shared page counted as each process's share, so the two add up to "
         "what they hold together; the largest sum seen):\n\n";
  printMemory(out, report.peak_rss, report.peak_pss);
  out << "\n";
  printTargets(out, report);
  if (!report.notes.empty()) {
    out << "\nNotes:\n";
    for (const auto& note : report.notes) {
      out << "- " << note << '\n';
    }
  }
}

}  // namespace ddprun::bench

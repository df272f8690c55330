#include "launch_report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "format.hpp"

namespace ddprun::bench {
namespace {

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

// Launches and restarts: both launchers' figures, the floor's, and ddprun's
// multiple of it.
void printLaunchHeader(std::ostream& out) {
  out << "| Workers | ddprun median ms | ddprun p90 ms | torchrun median ms | torchrun p90 ms "
         "| floor median ms | floor p90 ms | torchrun / ddprun (median) "
         "| ddprun / floor (median) | Other processes' CPU, cores |\n"
      << "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
}

std::string floorsCell(const Samples& ddprun, const Samples& floor) {
  if (ddprun.empty() || floor.empty() || floor.median() <= 0) {
    return "–";
  }
  return formatNumber("%.2f×", ddprun.median() / floor.median());
}

void printLaunchRow(std::ostream& out, const Comparison& row) {
  const Samples& d = row.ddprun;
  const Samples& t = row.torchrun;
  const Samples& f = row.floor;
  out << "| " << row.label << " | " << cell(d, d.median()) << " | " << cell(d, d.p90()) << " | "
      << cell(t, t.median()) << " | " << cell(t, t.p90()) << " | " << cell(f, f.median()) << " | "
      << cell(f, f.p90()) << " | " << ratioCell(d, t, d.median(), t.median()) << " | "
      << floorsCell(d, f) << " | " << formatNumber("%.2f", row.other_cores) << " |\n";
}

// ddprun's restarts phase by phase: the median time after the crash at which
// each phase ended, and the median of each phase's own length (a
// replacement's run counted from its own spawn).
void printRestartPhases(std::ostream& out, const std::vector<RestartComparison>& rows) {
  out << "| Workers | phase | ms after the crash (median) | p90 | its own length (median) "
         "| p90 |\n"
      << "|---|---|---:|---:|---:|---:|\n";
  for (const auto& row : rows) {
    for (std::size_t phase = 0; phase < kRestartPhaseCount; ++phase) {
      const Samples& at = row.since_crash[phase];
      const Samples& took = row.phase_took[phase];
      out << "| " << (phase == 0 ? row.label : "") << " | "
          << restartPhaseName(static_cast<RestartPhase>(phase)) << " | " << cell(at, at.median())
          << " | " << cell(at, at.p90()) << " | " << cell(took, took.median()) << " | "
          << cell(took, took.p90()) << " |\n";
    }
  }
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
    const bool measured = !row.ddprun.empty() && !row.floor.empty() && row.floor.median() > 0;
    const double floors = measured ? row.ddprun.median() / row.floor.median() : 0.0;
    out << "| launch ≤ " << formatNumber("%.1f× the floor, ", row.floor_target) << row.label
        << " | "
        << (measured
                ? formatNumber("%.2f×", floors) + formatNumber(" (%.1f ms", row.ddprun.median()) +
                      formatNumber(" against %.1f ms)", row.floor.median())
                : "–")
        << " | " << metCell(measured, floors <= row.floor_target) << " |\n";
  }
  for (const auto& row : report.restart) {
    const Samples& d = row.all_started.ddprun;
    const Samples& f = row.all_started.floor;
    out << "| restart ≤ " << formatNumber("%.0f", row.target_ms) << " ms, " << row.label << " | "
        << (d.empty() ? "–"
                      : formatNumber("median %.1f ms", d.median()) +
                            formatNumber(", p90 %.1f ms", d.p90()))
        << (f.empty() || d.empty() ? ""
                                   : formatNumber(" (the floor %.1f ms: ", f.median()) +
                                         formatNumber("%.2f× it)", d.median() / f.median()))
        << " | " << metCell(!d.empty(), !d.empty() && d.median() <= row.target_ms) << " |\n";
  }
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
  printLaunchHeader(out);
  for (const auto& row : report.launch) {
    printLaunchRow(out, row);
  }
  out << "\nRestart: rank 0 crashes (its stamp right before exit(1)) → the last replacement "
         "worker has entered main; the floor: the shell started → the last of the same "
         "replacement workers, started alone, has entered main:\n\n";
  printLaunchHeader(out);
  for (const auto& row : report.restart) {
    printLaunchRow(out, row.all_started);
  }
  out << "\n";
  printRestartDetail(out, report.restart);
  out << "\nddprun's restarts phase by phase: the agent's moments from its timeline.json "
         "(CLOCK_MONOTONIC, the workers' clock) between the workers' own stamps; each phase's "
         "own length is from the phase before it, a replacement's run from its own spawn (the "
         "interpreter or program starting):\n\n";
  printRestartPhases(out, report.restart);
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

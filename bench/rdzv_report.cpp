// Prints rdzv_bench's report: the setup, one table per figure with both
// launchers and their ratio, the targets, and notes.
#include "rdzv_report.hpp"

#include "format.hpp"

namespace ddprun::bench {
namespace {

constexpr double kRendezvousTargetMs = 10.0;
constexpr int kRendezvousTargetAgents = 128;
constexpr double kRecoveryTargetMs = 100.0;

std::string figure(const Samples& samples, double value) {
  return samples.empty() ? "–" : formatNumber("%.1f", value);
}

// torchrun's median cell: the figure, with a note when some runs gave none.
std::string torchrunMedian(const RdzvRow& row) {
  const Samples& t = row.torchrun;
  if (t.empty()) {
    return row.torchrun_note.empty() ? "–" : row.torchrun_note;
  }
  std::string cell = formatNumber("%.1f", t.median());
  if (t.failures() > 0) {
    cell += " (" + std::to_string(t.count()) + " of " + std::to_string(t.count() + t.failures()) +
            " runs; " + row.torchrun_note + ")";
  }
  return cell;
}

std::string ratioCell(const RdzvRow& row) {
  if (row.ddprun.empty() || row.torchrun.empty() || row.ddprun.median() <= 0) {
    return "–";
  }
  return formatNumber("%.0f×", row.torchrun.median() / row.ddprun.median());
}

void printTable(std::ostream& out, const char* title, const std::vector<RdzvRow>& rows) {
  out << "### " << title << "\n\n"
      << "| Agents | ddprun median ms | ddprun p90 ms | torchrun median ms | torchrun p90 ms "
         "| torchrun / ddprun (median) | Other processes' CPU, cores |\n"
      << "|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const RdzvRow& row : rows) {
    out << "| " << row.agents << " | " << figure(row.ddprun, row.ddprun.median()) << " | "
        << figure(row.ddprun, row.ddprun.p90()) << " | " << torchrunMedian(row) << " | "
        << figure(row.torchrun, row.torchrun.p90()) << " | " << ratioCell(row) << " | "
        << formatNumber("%.2f", row.other_cores) << " |\n";
  }
  out << '\n';
}

// The first worker against the last, per launcher: a wide gap on one
// machine is N agents taking turns on its CPUs, not the rendezvous.
void printSpread(std::ostream& out, const char* title, const std::vector<RdzvRow>& rows) {
  out << "#### " << title << ": first worker and last, median ms\n\n"
      << "| Agents | ddprun first | ddprun last | torchrun first | torchrun last |\n"
      << "|---:|---:|---:|---:|---:|\n";
  for (const RdzvRow& row : rows) {
    out << "| " << row.agents << " | " << figure(row.ddprun_first, row.ddprun_first.median())
        << " | " << figure(row.ddprun, row.ddprun.median()) << " | "
        << figure(row.torchrun_first, row.torchrun_first.median()) << " | "
        << figure(row.torchrun, row.torchrun.median()) << " |\n";
  }
  out << '\n';
}

std::string measuredCell(const Samples& samples) {
  return samples.empty() ? "–"
                         : formatNumber("median %.1f ms", samples.median()) +
                               formatNumber(", p90 %.1f ms", samples.p90());
}

std::string metCell(const Samples& samples, double target_ms) {
  if (samples.empty()) {
    return "not measured";
  }
  return samples.median() <= target_ms ? "yes" : "no";
}

void printTargets(std::ostream& out, const RdzvReport& report) {
  out << "### Targets (ddprun, judged on the median)\n\n"
      << "| Target | Measured | Met? |\n|---|---|---|\n";
  bool at_target_count = false;
  for (const RdzvRow& row : report.rendezvous) {
    if (row.agents == kRendezvousTargetAgents) {
      at_target_count = true;
      out << "| rendezvous ≤ " << formatNumber("%.0f", kRendezvousTargetMs)
          << " ms at N = " << row.agents << " | " << measuredCell(row.ddprun) << " | "
          << metCell(row.ddprun, kRendezvousTargetMs) << " |\n";
    }
  }
  if (!at_target_count) {
    out << "| rendezvous ≤ " << formatNumber("%.0f", kRendezvousTargetMs)
        << " ms at N = " << kRendezvousTargetAgents << " | – | not measured (not in --agents) |\n";
  }
  for (const RdzvRow& row : report.recovery) {
    out << "| detection + restart ≤ " << formatNumber("%.0f", kRecoveryTargetMs)
        << " ms, N = " << row.agents << " | " << measuredCell(row.ddprun) << " | "
        << metCell(row.ddprun, kRecoveryTargetMs) << " |\n";
  }
  out << '\n';
}

}  // namespace

void printRdzvReport(std::ostream& out, const RdzvReport& report) {
  out << "## rdzv_bench: ddprun's elastic rendezvous against torchrun's c10d\n\n"
      << report.setup << "\n\n";
  if (!report.rendezvous.empty()) {
    printTable(out,
               "Rendezvous latency: last agent started → last worker of round 0 started, ms "
               "(--nnodes N, 1 worker per agent)",
               report.rendezvous);
    printSpread(out, "Rendezvous latency", report.rendezvous);
  }
  if (!report.recovery.empty()) {
    printTable(out,
               "Failure recovery: one agent SIGKILLed → last survivor's next worker started, ms "
               "(--nnodes 1:N, 1 worker per agent)",
               report.recovery);
    printSpread(out, "Failure recovery", report.recovery);
  }
  printTargets(out, report);
  if (!report.notes.empty()) {
    out << "### Notes\n\n";
    for (const std::string& note : report.notes) {
      out << "- " << note << '\n';
    }
  }
}

}  // namespace ddprun::bench

// Prints rdzv_bench's report: the setup, one table per figure with every
// launcher and the ratios, the targets, and notes.
#include "rdzv_report.hpp"

#include "format.hpp"

namespace ddprun::bench {

LauncherFigures& RdzvRow::of(Launcher launcher) {
  switch (launcher) {
    case Launcher::Ddprun:
      return ddprun;
    case Launcher::DdprunEtcd:
      return etcd;
    case Launcher::Torchrun:
      break;
  }
  return torchrun;
}

namespace {

constexpr double kRendezvousTargetMs = 10.0;
constexpr int kRendezvousTargetAgents = 128;
constexpr double kRecoveryTargetMs = 100.0;
// etcd's targets (issue 30's), relative to c10d's figure and to the lease
// TTL: a lost agent cannot be noticed before its TTL has passed.
constexpr double kEtcdRendezvousMaxRatio = 1.5;
constexpr double kEtcdRecoveryOverTtlMs = 100.0;

std::string figure(const Samples& samples, double value) {
  return samples.empty() ? "–" : formatNumber("%.1f", value);
}

// A launcher's median cell: the figure, with a note when some runs gave none.
std::string medianCell(const LauncherFigures& figures) {
  const Samples& s = figures.last;
  if (s.empty()) {
    return figures.note.empty() ? "–" : figures.note;
  }
  std::string cell = formatNumber("%.1f", s.median());
  if (s.failures() > 0) {
    cell += " (" + std::to_string(s.count()) + " of " + std::to_string(s.count() + s.failures()) +
            " runs; " + figures.note + ")";
  }
  return cell;
}

// `over` / `under`, medians; "–" when either is missing.
std::string ratioCell(const LauncherFigures& over, const LauncherFigures& under,
                      const char* pattern) {
  if (under.last.empty() || over.last.empty() || under.last.median() <= 0) {
    return "–";
  }
  return formatNumber(pattern, over.last.median() / under.last.median());
}

// ttl_ms > 0: a column of etcd's recovery beyond its lease TTL.
void printTable(std::ostream& out, const std::string& title, const std::vector<RdzvRow>& rows,
                double ttl_ms) {
  out << "### " << title << "\n\n"
      << "| Agents | ddprun c10d median ms | ddprun c10d p90 ms | ddprun etcd median ms "
         "| ddprun etcd p90 ms | ";
  if (ttl_ms > 0) {
    out << "etcd − TTL, median ms | ";
  }
  out << "torchrun median ms | torchrun p90 ms | etcd / c10d (median) "
         "| torchrun / c10d (median) | Other processes' CPU, cores |\n"
      << "|---:|---:|---:|---:|---:|" << (ttl_ms > 0 ? "---:|" : "")
      << "---:|---:|---:|---:|---:|\n";
  for (const RdzvRow& row : rows) {
    out << "| " << row.agents << " | " << medianCell(row.ddprun) << " | "
        << figure(row.ddprun.last, row.ddprun.last.p90()) << " | " << medianCell(row.etcd) << " | "
        << figure(row.etcd.last, row.etcd.last.p90()) << " | ";
    if (ttl_ms > 0) {
      out << (row.etcd.last.empty() ? "–" : formatNumber("%+.1f", row.etcd.last.median() - ttl_ms))
          << " | ";
    }
    out << medianCell(row.torchrun) << " | " << figure(row.torchrun.last, row.torchrun.last.p90())
        << " | " << ratioCell(row.etcd, row.ddprun, "%.2f×") << " | "
        << ratioCell(row.torchrun, row.ddprun, "%.0f×") << " | "
        << formatNumber("%.2f", row.other_cores) << " |\n";
  }
  out << '\n';
}

// The first worker against the last, per launcher: a wide gap on one
// machine is N agents taking turns on its CPUs, not the rendezvous.
void printSpread(std::ostream& out, const char* title, const std::vector<RdzvRow>& rows) {
  out << "#### " << title << ": first worker and last, median ms\n\n"
      << "| Agents | c10d first | c10d last | etcd first | etcd last | torchrun first "
         "| torchrun last |\n"
      << "|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const RdzvRow& row : rows) {
    out << "| " << row.agents;
    for (const LauncherFigures* f : {&row.ddprun, &row.etcd, &row.torchrun}) {
      out << " | " << figure(f->first, f->first.median()) << " | "
          << figure(f->last, f->last.median());
    }
    out << " |\n";
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

void printDdprunTargets(std::ostream& out, const RdzvReport& report) {
  bool at_target_count = false;
  for (const RdzvRow& row : report.rendezvous) {
    if (row.agents == kRendezvousTargetAgents) {
      at_target_count = true;
      out << "| c10d rendezvous ≤ " << formatNumber("%.0f", kRendezvousTargetMs)
          << " ms at N = " << row.agents << " | " << measuredCell(row.ddprun.last) << " | "
          << metCell(row.ddprun.last, kRendezvousTargetMs) << " |\n";
    }
  }
  if (!at_target_count) {
    out << "| c10d rendezvous ≤ " << formatNumber("%.0f", kRendezvousTargetMs)
        << " ms at N = " << kRendezvousTargetAgents << " | – | not measured (not in --agents) |\n";
  }
  for (const RdzvRow& row : report.recovery) {
    out << "| c10d detection + restart ≤ " << formatNumber("%.0f", kRecoveryTargetMs)
        << " ms, N = " << row.agents << " | " << measuredCell(row.ddprun.last) << " | "
        << metCell(row.ddprun.last, kRecoveryTargetMs) << " |\n";
  }
}

void printEtcdTargets(std::ostream& out, const RdzvReport& report) {
  for (const RdzvRow& row : report.rendezvous) {
    const Samples& etcd = row.etcd.last;
    const Samples& c10d = row.ddprun.last;
    out << "| etcd rendezvous ≤ " << formatNumber("%.1f", kEtcdRendezvousMaxRatio)
        << "× c10d's, N = " << row.agents << " | ";
    if (etcd.empty() || c10d.empty() || c10d.median() <= 0) {
      out << "– | not measured |\n";
      continue;
    }
    const double ratio = etcd.median() / c10d.median();
    out << formatNumber("etcd %.1f ms", etcd.median())
        << formatNumber(" / c10d %.1f ms", c10d.median()) << formatNumber(" = %.2f×", ratio);
    if (!report.etcd_requests.empty()) {
      const double floor = c10d.median() + report.etcd_requests.three_writes.median();
      out << formatNumber("; floor: c10d + etcd's three writes = %.1f ms", floor)
          << formatNumber(" = %.2f×", floor / c10d.median());
    }
    out << " | " << (ratio <= kEtcdRendezvousMaxRatio ? "yes" : "no") << " |\n";
  }
  const double ttl_ms = report.etcd_lease_ttl_s * 1000.0;
  for (const RdzvRow& row : report.recovery) {
    const Samples& etcd = row.etcd.last;
    out << "| etcd recovery ≤ TTL + " << formatNumber("%.0f", kEtcdRecoveryOverTtlMs)
        << " ms = " << formatNumber("%.0f", ttl_ms + kEtcdRecoveryOverTtlMs)
        << " ms, N = " << row.agents << " | " << measuredCell(etcd);
    if (!etcd.empty()) {
      out << formatNumber("; − TTL: median %+.1f ms", etcd.median() - ttl_ms)
          << formatNumber(", p90 %+.1f ms", etcd.p90() - ttl_ms);
    }
    out << " | " << metCell(etcd, ttl_ms + kEtcdRecoveryOverTtlMs) << " |\n";
  }
}

std::string medianAndP90(const Samples& samples) {
  return formatNumber("%.2f", samples.median()) + formatNumber(" (%.2f)", samples.p90());
}

void printEtcdRequests(std::ostream& out, const EtcdRequestTimes& times) {
  out << "### etcd's own requests on this cluster: median (p90) ms of "
      << times.three_writes.count()
      << " rounds, ddprun's etcd client, one kept-alive connection\n\n"
      << "| LeaseGrant | Put on the lease | Txn | the three in a row | serializable Range "
         "(no raft) |\n|---:|---:|---:|---:|---:|\n"
      << "| " << medianAndP90(times.grant) << " | " << medianAndP90(times.put) << " | "
      << medianAndP90(times.txn) << " | " << medianAndP90(times.three_writes) << " | "
      << medianAndP90(times.serializable_read) << " |\n\n"
      << "The last agent's lease and its membership key, then the coordinator's state "
         "transaction, follow one another on an etcd round's path, where c10d decides in "
         "ddprund's memory: c10d's figure plus the three in a row is the least an etcd round "
         "can take here. The serializable read, which skips raft, is what etcd's JSON "
         "gateway costs a request by itself.\n\n";
}

void printTargets(std::ostream& out, const RdzvReport& report) {
  out << "### Targets (ddprun, judged on the median)\n\n"
      << "| Target | Measured | Met? |\n|---|---|---|\n";
  printDdprunTargets(out, report);
  if (report.etcd_lease_ttl_s > 0) {
    printEtcdTargets(out, report);
  }
  out << '\n';
}

}  // namespace

void printRdzvReport(std::ostream& out, const RdzvReport& report) {
  out << "## rdzv_bench: ddprun's elastic rendezvous (c10d through ddprund, etcd-v3) against "
         "torchrun's c10d\n\n"
      << report.setup << "\n\n";
  if (!report.rendezvous.empty()) {
    printTable(out,
               "Rendezvous latency: last agent started → last worker of round 0 started, ms "
               "(--nnodes N, 1 worker per agent)",
               report.rendezvous, 0.0);
    printSpread(out, "Rendezvous latency", report.rendezvous);
  }
  if (!report.recovery.empty()) {
    const std::string ttl =
        report.etcd_lease_ttl_s > 0
            ? "; etcd lease TTL " + std::to_string(report.etcd_lease_ttl_s) + " s"
            : std::string();
    printTable(out,
               "Failure recovery: one agent SIGKILLed → last survivor's next worker started, ms "
               "(--nnodes 1:N, 1 worker per agent" +
                   ttl + ")",
               report.recovery, report.etcd_lease_ttl_s * 1000.0);
    printSpread(out, "Failure recovery", report.recovery);
  }
  if (!report.etcd_requests.empty()) {
    printEtcdRequests(out, report.etcd_requests);
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

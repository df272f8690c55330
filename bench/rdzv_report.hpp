// rdzv_bench's figures and the Markdown tables they are printed as: one row
// per scenario and agent count with every launcher, and the targets.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "elastic_job.hpp"
#include "etcd_requests.hpp"
#include "launch_report.hpp"

namespace ddprun::bench {

// One launcher's figure at one agent count, in ms: until the last worker
// started (the figure), and until the first did (how much of it is the
// rendezvous deciding, how much the agents acting on it one by one).
struct LauncherFigures {
  Samples last;
  Samples first;
  // Why there are fewer figures than runs (skipped, or no recovery); empty
  // when every run gave one.
  std::string note;
};

// One scenario at one agent count, every launcher.
struct RdzvRow {
  int agents = 0;
  LauncherFigures ddprun;  // c10d, through ddprund
  LauncherFigures etcd;    // ddprun's etcd-v3 backend
  LauncherFigures torchrun;
  double other_cores = 0.0;  // CPUs kept busy by other processes meanwhile, on average

  LauncherFigures& of(Launcher launcher);
};

struct RdzvReport {
  std::string setup;                // what was run and how, and the machine's load
  int etcd_lease_ttl_s = 0;         // the etcd agents' lease TTL; 0: etcd not measured
  std::vector<RdzvRow> rendezvous;  // last agent started -> last worker started
  std::vector<RdzvRow> recovery;    // agent killed -> last survivor's new worker started
  EtcdRequestTimes etcd_requests;   // empty: etcd not measured
  std::vector<std::string> notes;
};

void printRdzvReport(std::ostream& out, const RdzvReport& report);

}  // namespace ddprun::bench

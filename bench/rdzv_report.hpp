// rdzv_bench's figures and the Markdown tables they are printed as: one row
// per scenario and agent count with both launchers, and the targets.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "launch_report.hpp"

namespace ddprun::bench {

// One figure at one agent count, both launchers, in ms: until the last
// worker started (the figure), and until the first did (how much of it is
// the rendezvous deciding, how much the agents acting on it one by one).
struct RdzvRow {
  int agents = 0;
  Samples ddprun;
  Samples torchrun;
  Samples ddprun_first;
  Samples torchrun_first;
  // Why torchrun has fewer figures than runs (skipped, or no recovery);
  // empty when every run gave one.
  std::string torchrun_note;
  double other_cores = 0.0;  // CPUs kept busy by other processes meanwhile, on average
};

struct RdzvReport {
  std::string setup;                // what was run and how, and the machine's load
  std::vector<RdzvRow> rendezvous;  // last agent started -> last worker started
  std::vector<RdzvRow> recovery;    // agent killed -> last survivor's new worker started
  std::vector<std::string> notes;
};

void printRdzvReport(std::ostream& out, const RdzvReport& report);

}  // namespace ddprun::bench

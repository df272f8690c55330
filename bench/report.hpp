// Markdown tables for the README: the LibTorch-client key-value load side
// by side (the store-scale tables are store_scale_report.hpp's).
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "load_gen.hpp"

namespace ddprun::bench {

// One client count measured against both servers.
struct LoadComparison {
  LoadResult ddprund;
  LoadResult libtorch;
};

struct ReportContext {
  std::string setup;               // one line: what was run, with which options
  std::vector<std::string> notes;  // problems worth reading (errors, unclean exits)
};

void printLoadTable(std::ostream& out, const std::vector<LoadComparison>& rows);
// Tail percentiles and per-client fairness for each server (--detail).
void printLoadDetail(std::ostream& out, const std::vector<LoadComparison>& rows);
void printNotes(std::ostream& out, const ReportContext& context);

// The 1-minute load average right now.
double loadAverage();

}  // namespace ddprun::bench

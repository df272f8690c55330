// Markdown tables for the README: the key-value load side by side, and the
// barrier.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "barrier.hpp"
#include "load_gen.hpp"
#include "raw_load.hpp"

namespace ddprun::bench {

// One client count measured against both servers.
struct LoadComparison {
  LoadResult ddprund;
  LoadResult libtorch;
};

struct RawComparison {
  RawLoadResult ddprund;
  RawLoadResult libtorch;
};

struct BarrierComparison {
  BarrierResult ddprund;
  BarrierResult libtorch;
};

struct ReportContext {
  std::string setup;               // one line: what was run, with which options
  std::vector<std::string> notes;  // problems worth reading (errors, unclean exits)
};

void printLoadTable(std::ostream& out, const std::vector<LoadComparison>& rows);
// Tail percentiles and per-client fairness for each server (--detail).
void printLoadDetail(std::ostream& out, const std::vector<LoadComparison>& rows);
void printRawTable(std::ostream& out, const std::vector<RawComparison>& rows);
void printBarrierTable(std::ostream& out, const BarrierComparison& barrier);
void printNotes(std::ostream& out, const ReportContext& context);

// The 1-minute load average right now.
double loadAverage();

}  // namespace ddprun::bench

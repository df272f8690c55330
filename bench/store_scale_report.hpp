// The store-scale tables (see store_scale.hpp), in Markdown, each figure
// beside its target. Stateless; any thread.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "barrier.hpp"
#include "raw_load.hpp"

namespace ddprun::bench {

// The targets for the store at scale.
inline constexpr double kBarrierTargetSeconds = 5.0;   // first connect to last release
inline constexpr double kServerRssTargetMiB = 1024.0;  // the server's peak, at 100,000
inline constexpr double kCpuPerOpTargetRatio = 0.5;    // ddprund's CPU/op over LibTorch's
inline constexpr double kCpuPerOpFloorRatio = 1.2;     // ddprund's CPU/op over the echo floor's

// One barrier run, or why it was not run (not_run non-empty).
struct BarrierRow {
  std::string server;
  BarrierBytes bytes = BarrierBytes::Torch113;
  BarrierResult result;
  std::string not_run;
};

// Every raw load run against one server at one connection count, or why
// there are none.
struct ServerRuns {
  std::vector<RawLoadResult> runs;
  std::string missing;  // why the server was not run (its program is missing)
};

// One connection count of the raw load, every run against each server.
struct CpuPerOpRow {
  int connections = 0;
  ServerRuns ddprund;
  ServerRuns libtorch;
  ServerRuns echo_floor;  // the kernel's floor (echo_floor.cpp)
};

void printBarrierScaleTable(std::ostream& out, const std::vector<BarrierRow>& rows);
// Where the asked count could not be run (fd limit), ddprund's runs at the
// count that fit, scaled linearly to the asked one; says it is an estimate.
void printExtrapolation(std::ostream& out, const std::vector<BarrierRow>& rows, int asked);
void printCpuPerOpTable(std::ostream& out, const std::vector<CpuPerOpRow>& rows);
// ddprund's cost per connection count (one barrier run each).
void printGrowthTable(std::ostream& out, const std::vector<BarrierRow>& rows);

// The run with the median server CPU per operation (failed runs sort first).
RawLoadResult medianByCpuPerOp(std::vector<RawLoadResult> runs);

}  // namespace ddprun::bench

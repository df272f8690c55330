// launch_bench's figures and the Markdown tables they are printed as.
#pragma once

#include <array>
#include <ostream>
#include <string>
#include <vector>

#include "restart_phases.hpp"

namespace ddprun::bench {

// Repeated measurements of one figure (milliseconds or KiB).
class Samples {
 public:
  void add(double value) { values_.push_back(value); }
  void addFailure() { ++failures_; }
  bool empty() const { return values_.empty(); }
  int count() const { return static_cast<int>(values_.size()); }
  int failures() const { return failures_; }
  double median() const;
  double p90() const;  // nearest rank
  double max() const;

 private:
  std::vector<double> values_;
  int failures_ = 0;
};

// One figure for both launchers, under one worker variant, and for launches
// the floor: a shell starting the same workers in parallel.
struct Comparison {
  std::string label;
  Samples ddprun;
  Samples torchrun;
  double other_cores = 0.0;  // CPUs kept busy by other processes meanwhile, on average
  Samples floor;
  double floor_target = 0.0;  // launches: ddprun's median at most this many floors
};

// The restart figures of one worker variant, each from the crash stamp.
struct RestartComparison {
  std::string label;
  Comparison all_started;     // the last replacement worker entered main
  Comparison first_started;   // the first replacement worker entered main
  Comparison survivors_told;  // the first surviving worker got SIGTERM
  double target_ms = 0.0;     // ddprun's median at most this
  // ddprun's restarts phase by phase (restart_phases.hpp): ms after the crash,
  // and each phase's own share (the time since the phase before it).
  std::array<Samples, kRestartPhaseCount> since_crash;
  std::array<Samples, kRestartPhaseCount> phase_took;
};

struct LaunchReport {
  std::string setup;  // what was run and how, and the machine's load
  bool torchrun_run = true;
  std::vector<Comparison> launch;  // ms
  std::vector<RestartComparison> restart;
  Comparison peak_rss;  // KiB: VmHWM, for ddprun its two processes' added
  Comparison peak_pss;  // KiB: the largest PSS sum seen at the same moments
  std::vector<std::string> notes;
};

void printLaunchReport(std::ostream& out, const LaunchReport& report);

}  // namespace ddprun::bench

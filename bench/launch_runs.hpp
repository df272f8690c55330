// launch_bench's measurements: ddprun against torchrun launching the same
// workers, side by side in one run, printed as Markdown tables with both
// figures and their ratio: launch time, restart time after a worker crash,
// and the agent's memory (peak RSS, and its proportional set size).
//
// Both launchers get the same workers, the same environment and the same
// number of runs, alternating so that other load on the machine falls on both
// alike; each variant starts with one untimed run of each launcher, so
// neither pays for a cold page cache. Everything a worker tells the benchmark
// goes through files in a fresh directory per run (see restart_worker.cpp).
#pragma once

#include <ostream>
#include <string>

namespace ddprun::bench {

struct LaunchOptions {
  int runs = 10;
  int nproc = 4;
  bool skip_torchrun = false;
  double timeout_s = 120.0;
  std::string ddprun;
  std::string python;  // empty: the first python3 or python on PATH that can import torch
};

// Runs every measurement (progress on stderr) and prints the report to
// `out`. Throws if a program it needs is missing.
void runLaunchBench(const LaunchOptions& options, std::ostream& out);

}  // namespace ddprun::bench

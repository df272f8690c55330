// train_bench's figures: the `throughput:` line a trainer's rank 0 prints
// (see the train contract), and the Markdown table that compares ddprun+train
// with torchrun+Python per task.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "launch_report.hpp"

namespace ddprun::bench {

// "throughput: samples=<n> seconds=<s> samples_per_s=<r>"
struct Throughput {
  std::int64_t samples = 0;
  double seconds = 0.0;
  // From samples and seconds rather than the printed ratio, which is rounded.
  double perSecond() const { return seconds > 0 ? static_cast<double>(samples) / seconds : 0.0; }
};

// The last throughput line in a launcher's log, wherever it sits in the line
// (a launcher may prefix worker output); empty if there is none.
std::optional<Throughput> readThroughput(const std::filesystem::path& log);

// The speed-up ddprun+train must reach over torchrun+Python; empty for a task
// without a target. With progress_cost, what reporting progress may cost: the
// rate with it on must be within 1% of the rate with it off, for every task.
std::optional<double> targetRatio(const std::string& task, bool progress_cost = false);

// One task's runs under both pairs.
struct TrainComparison {
  std::string task;
  Samples ddprun_rate;       // samples/s, ddprun+train
  Samples python_rate;       // samples/s, torchrun+Python (progress off with --progress-cost)
  Samples ddprun_wall;       // s, the whole ddprun run: launch to exit
  Samples python_wall;       // s, the whole run of the second pair
  double other_cores = 0.0;  // CPUs kept busy by other processes meanwhile, on average
};

struct TrainReport {
  std::string setup;  // what was run and how, and the machine's load
  std::vector<TrainComparison> tasks;
  std::vector<std::string> notes;
  bool progress_cost = false;  // the second pair is ddprun+train with progress off
};

void printTrainReport(std::ostream& out, const TrainReport& report);

}  // namespace ddprun::bench

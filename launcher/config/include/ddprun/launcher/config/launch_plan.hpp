// The launch plan --dry-run prints: one JSON object with every value that
// decides the launch, each as {"value": ..., "source": ...} where source is
// "flag", "env:<VARIABLE>", "slurm:<VARIABLE>", "derived" or "default"
// (docs/torchrun-contract.md §2.5). A pure function; safe on any thread.
#pragma once

#include <string>
#include <vector>

#include "ddprun/launcher/core/launch_config.hpp"

namespace ddprun::launcher {

// What the agent resolves at start from the machine, given to the plan.
struct ResolvedLaunch {
  int nproc = 1;                         // workers per node, --nproc-per-node resolved
  std::string python;                    // the workers' Python; empty when none runs them
  std::string python_source;             // "env:PYTHON_EXEC" or "derived"
  std::vector<std::string> worker_argv;  // local rank 0's command line
};

// The plan as one line of JSON.
std::string launchPlanJson(const LaunchConfig& config, const ResolvedLaunch& resolved);

}  // namespace ddprun::launcher

// Where ddprun's flags send each worker's output and error file: the run's
// log directory (<log-dir>/<run-id>, or a fresh one under $TMPDIR) and, per
// worker and attempt, -r/-t/--local-ranks-filter/--log-line-prefix-template.
// Stateless functions; they create directories.
#pragma once

#include <filesystem>
#include <string>

#include "ddprun/launcher/agent.hpp"
#include "ddprun/launcher/launch_config.hpp"

namespace ddprun::launcher {

std::filesystem::path runLogDir(const LaunchConfig& config);

WorkerOutput workerOutput(const LaunchConfig& config, const std::filesystem::path& run_dir,
                          const std::string& hostname, int local_rank, int rank, int attempt);

}  // namespace ddprun::launcher

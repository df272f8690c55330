// Runs `train` (directly, under ddprun or under torchrun) as a real child
// process with its output captured in a temp dir, and reads back the model a
// run left in its snapshot. Used by one test thread.
#pragma once

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "ddprun/launcher/process/subprocess.hpp"
#include "ddprun/test_support/temp_dir.hpp"
#include "ddprun/worker/tasks.hpp"

namespace ddprun::worker::testing {

struct RunOutcome {
  launcher::ExitStatus status;
  std::string stdout_text;
  std::string stderr_text;
};

using EnvList = std::vector<std::pair<std::string, std::string>>;

class TrainRunner {
 public:
  explicit TrainRunner(const std::filesystem::path& dir) : dir_(dir) {}

  // Any program, with exactly `env` (plus PATH, and TMPDIR: the runner's
  // directory) as its environment.
  RunOutcome run(std::vector<std::string> argv, EnvList env = {}) const;
  // ddprun --standalone --nproc-per-node N [launcher_args] train [train_args].
  RunOutcome ddprun(int nproc, std::vector<std::string> train_args,
                    std::vector<std::string> launcher_args = {}) const;
  // `train` with no launcher environment.
  RunOutcome trainAlone(std::vector<std::string> train_args, EnvList env = {}) const;

  std::string snapshot(const std::string& name) const { return (dir_ / name).string(); }

 private:
  std::filesystem::path dir_;
};

// The task `name` with the snapshot at `path` loaded into it.
Task loadSnapshotInto(const std::string& name, const std::string& path);

// The largest absolute difference between two tasks' parameters.
double maxParameterDifference(Task& a, Task& b);

// A report of how a run ended, for assertion messages.
std::string describe(const RunOutcome& outcome);

}  // namespace ddprun::worker::testing

// train's command line: the seeds' flags (--total-epochs, --save-every,
// --batch-size, --snapshot-path) in both spellings, plus the task, optimiser,
// data and fault-injection settings. Pure parsing; nothing is opened here.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ddprun::worker {

enum class FailMode { kExit, kKill, kKillDuringSave };

// A failure the tests inject on purpose; active on attempt 0 only, so the
// restarted group runs clean.
struct FaultInjection {
  std::optional<int64_t> at_epoch;  // unset: no fault
  int rank = 0;
  FailMode mode = FailMode::kExit;
  int exit_code = 1;  // train's exit code in mode exit
};

struct TrainOptions {
  std::string task = "mlp";
  int64_t total_epochs = 10;
  int64_t save_every = 5;   // 0: only at the end
  int64_t batch_size = 32;  // per rank; the global batch is batch_size x WORLD_SIZE
  std::string snapshot_path = "snapshot.pt";
  bool ignore_snapshot = false;  // on attempt 0 only: a restart resumes this job's snapshot
  std::optional<double> lr;      // unset: the task's default
  uint64_t seed = 0;
  std::string data_dir = "/usr/share/datasets/fashion-mnist";
  int64_t samples = 0;           // 0: the task's default (mlp 2048; fmnist all 60000)
  int threads = 0;               // 0: LibTorch's default (OMP_NUM_THREADS)
  int timeout_s = 300;           // store and collective timeout
  std::string backend = "auto";  // auto | gloo | nccl
  FaultInjection fault;
  std::optional<std::string> inspect_snapshot;  // print a snapshot's header and exit
};

// Parses argv[1..]. Returns nullopt after printing --help or --version.
// Throws ConfigError with one line naming the flag on bad input.
std::optional<TrainOptions> parseTrainOptions(const std::vector<std::string>& args);

const char* failModeName(FailMode mode);

}  // namespace ddprun::worker

// train_bench's measurements: the C++ trainer (worker/train) under ddprun
// against the same training in Python (bench/python/ddp_train.py) under
// torchrun, side by side in one run, printed as a Markdown table of training
// throughput per task. With --progress-cost, the second pair is ddprun+train
// again with progress reporting off, which prices the worker's progress events.
//
// Both pairs get the same task, data, model, batch size, epochs, backend
// and one intra-op thread per rank on the same number of ranks (two, or one
// per GPU with --nproc-per-node gpu); each trainer's rank 0 times its own
// training epochs and prints a `throughput:` line (the train contract), which
// is what the table compares. The two pairs alternate which goes first, so
// other load on the machine falls on both alike. Any failed run stops the
// benchmark with one line naming the run and a log that outlives it.
#pragma once

#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace ddprun::bench {

struct TrainOptions {
  int runs = 3;
  int epochs = 5;
  int batch_size = 32;
  std::vector<std::string> tasks{"mlp", "fmnist"};
  std::optional<int> samples;  // unset: each trainer's own default for the task
  std::string loader = "dataloader";
  std::string nproc_per_node = "2";  // a count, or "gpu": one rank per visible GPU
  std::string backend = "auto";      // both trainers' --backend: auto, gloo or nccl
  double timeout_s = 900.0;
  // Compare ddprun+train with progress reporting on and off (DDPRUN_PROGRESS_EVENTS
  // unset for the worker) instead of with torchrun+python.
  bool progress_cost = false;
  // train_bench's main fills in where this build tree puts these (train only
  // where LibTorch was found: without it, only --train says where one is).
  std::string train;
  std::string ddprun;
  std::string script;
  std::string python;  // empty: found at run time
};

// Runs every task (progress on stderr) and prints the report to `out`.
// Throws, naming the run and a log that outlives it, if a run fails.
void runTrainBench(const TrainOptions& options, std::ostream& out);

}  // namespace ddprun::bench

// train_bench: ddprun+train against torchrun+python training the same task,
// printed as a Markdown table (see train_runs.hpp). This file only reads the
// flags.

#include <CLI/CLI.hpp>
#include <exception>
#include <iostream>
#include <string>

#include "train_runs.hpp"

namespace bench = ddprun::bench;

namespace {

void addOptions(CLI::App& app, bench::TrainOptions& options) {
  app.add_option("--runs", options.runs, "Runs per pair and task (the table shows the median)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--epochs", options.epochs, "--total-epochs for both trainers")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--batch-size", options.batch_size, "Per-rank batch size for both trainers")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--tasks", options.tasks, "Tasks to run: mlp, fmnist, autoencoder")
      ->delimiter(',')
      ->check(CLI::IsMember({"mlp", "fmnist", "autoencoder"}))
      ->capture_default_str();
  app.add_option("--samples", options.samples,
                 "--samples for both trainers (default: each task's own default)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--nproc-per-node", options.nproc_per_node,
                 "Ranks per run for both launchers: a count, or gpu (one per visible GPU)")
      ->check(CLI::PositiveNumber | CLI::IsMember({"gpu"}))
      ->capture_default_str();
  app.add_option("--backend", options.backend,
                 "Both trainers' --backend (auto: NCCL on GPUs where each can, else Gloo)")
      ->check(CLI::IsMember({"auto", "gloo", "nccl"}))
      ->capture_default_str();
  app.add_option("--loader", options.loader, "The Python trainer's --loader")
      ->check(CLI::IsMember({"dataloader", "tensor"}))
      ->capture_default_str();
  app.add_option("--timeout", options.timeout_s, "Seconds one launcher run may take")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--train", options.train, "The train executable")->capture_default_str();
  app.add_option("--ddprun", options.ddprun, "The ddprun executable")->capture_default_str();
  app.add_option("--python", options.python,
                 "Interpreter for torchrun and the Python trainer (default: the first python3 "
                 "or python on PATH that can import torch)");
  app.add_flag("--progress-cost", options.progress_cost,
               "Compare ddprun+train with progress reporting on and off instead of with "
               "torchrun+python (target: on within 1% of off)");
  app.add_option("--script", options.script, "The Python trainer")->capture_default_str();
}

}  // namespace

int main(int argc, char** argv) try {
  bench::TrainOptions options;
  // Where this build tree puts them; the flags override.
#ifdef DDPRUN_BENCH_TRAIN_PATH
  options.train = DDPRUN_BENCH_TRAIN_PATH;
#endif
  options.ddprun = DDPRUN_BENCH_DDPRUN_PATH;
  options.script = DDPRUN_BENCH_PYTHON_SCRIPT;
  CLI::App app{"Compares ddprun+train with torchrun+python: training throughput per task"};
  addOptions(app, options);
  CLI11_PARSE(app, argc, argv);
  bench::runTrainBench(options, std::cout);
  return 0;
} catch (const std::exception& error) {
  std::cerr << "train_bench: " << error.what() << '\n';
  return 1;
}

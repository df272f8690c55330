// slurm_bench: time from sbatch to the first training step of a two-node job
// on a real Slurm cluster in network namespaces, ddprun against Debian's
// torchrun (see slurm_runs.hpp). This file only reads the flags. Run as root.

#include <CLI/CLI.hpp>
#include <exception>
#include <iostream>
#include <string>

#include "slurm_runs.hpp"

namespace bench = ddprun::bench;

int main(int argc, char** argv) try {
  bench::SlurmBenchOptions options;
  // Where this build tree and checkout put them; the flags override.
  options.ddprun = DDPRUN_BENCH_DDPRUN_PATH;
  options.train = DDPRUN_BENCH_TRAIN_PATH;
  options.ddprun_script = DDPRUN_BENCH_SLURM_DDPRUN_SCRIPT;
  options.torchrun_script = DDPRUN_BENCH_SLURM_TORCHRUN_SCRIPT;
  options.python_script = DDPRUN_BENCH_PYTHON_SCRIPT;
  CLI::App app{"sbatch to the first training step on a Slurm cluster: ddprun against torchrun"};
  app.add_option("--runs", options.runs, "Jobs per stack (the table shows the median)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--timeout", options.timeout_s, "Seconds one job may take")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--python", options.python, "Interpreter for torchrun and ddp_train.py")
      ->capture_default_str();
  app.add_option("--ddprun", options.ddprun, "The ddprun executable")->capture_default_str();
  app.add_option("--train", options.train, "The train executable")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  bench::runSlurmBench(options, std::cout);
  return 0;
} catch (const std::exception& error) {
  std::cerr << "slurm_bench: " << error.what() << std::endl;
  return 1;
}

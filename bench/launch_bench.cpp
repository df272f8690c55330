// launch_bench: ddprun against torchrun launching the same workers, printed
// as Markdown tables (see launch_runs.hpp). This file only reads the flags.

#include <CLI/CLI.hpp>
#include <exception>
#include <iostream>
#include <string>

#include "launch_runs.hpp"
#include "machine.hpp"

namespace bench = ddprun::bench;

namespace {

std::string defaultDdprun() {
#ifdef DDPRUN_BENCH_DDPRUN_PATH
  return DDPRUN_BENCH_DDPRUN_PATH;
#else
  return (bench::selfDirectory() / ".." / "launcher" / "ddprun").lexically_normal().string();
#endif
}

void addOptions(CLI::App& app, bench::LaunchOptions& options) {
  app.add_option("--runs", options.runs, "Timed runs per launcher and variant (RSS: up to 3)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--nproc", options.nproc, "Workers per launch")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_flag("--skip-torchrun", options.skip_torchrun, "Measure ddprun only");
  app.add_option("--ddprun", options.ddprun, "The ddprun executable")->capture_default_str();
  app.add_option("--python", options.python,
                 "Interpreter for torchrun and the Python workers (default: the first "
                 "python3 or python on PATH that can import torch)");
  app.add_option("--timeout", options.timeout_s, "Seconds one launcher run may take")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
}

}  // namespace

int main(int argc, char** argv) try {
  bench::LaunchOptions options;
  options.ddprun = defaultDdprun();
  CLI::App app{"Compares ddprun with torchrun: launch time, restart time, agent peak RSS"};
  addOptions(app, options);
  CLI11_PARSE(app, argc, argv);
  bench::runLaunchBench(options, std::cout);
  return 0;
} catch (const std::exception& error) {
  std::cerr << "launch_bench: " << error.what() << '\n';
  return 1;
}

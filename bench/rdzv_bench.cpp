// rdzv_bench: ddprun's elastic rendezvous (agents joined through an external
// ddprund) against torchrun's c10d rendezvous (agent 0 hosting the store),
// side by side in one run on loopback, printed as Markdown tables with both
// figures and their ratio:
//
//   rendezvous latency: N agents, --nnodes N. N-1 agents start and join;
//     then the last one starts, and its join completes the round. Timed from
//     just before the last agent's fork (an upper bound on its join, so its
//     own start-up is in the figure) until the last worker of round 0 starts.
//   failure recovery: N agents, --nnodes 1:N, whose first workers hold. Once
//     every one runs, one agent (never torchrun's host) is SIGKILLed with its
//     workers; timed from the kill until the last survivor's replacement
//     worker starts. torchrun's survivors are not told of the loss by its
//     rendezvous, so they get a deadline, and "no recovery" is a figure too.
//
// Workers are restart_worker's `rdzv` mode: each stamps CLOCK_MONOTONIC at
// entry, which is steady_clock here, so stamps and fork times compare
// directly. Runs alternate between the launchers, so load from elsewhere
// falls on both alike. Any run that goes wrong ends the benchmark with one
// line naming the run and its log (kept after exit), and status 1.

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <iostream>
#include <sstream>
#include <thread>

#include "format.hpp"
#include "python_workers.hpp"
#include "rdzv_runs.hpp"

namespace bench = ddprun::bench;

namespace {

// Where this build tree put each program (CMake passes the paths); without
// one, the program next to rdzv_bench.
#ifndef DDPRUN_BENCH_DDPRUN_PATH
#define DDPRUN_BENCH_DDPRUN_PATH nullptr
#endif
#ifndef DDPRUN_BENCH_DDPRUND_PATH
#define DDPRUN_BENCH_DDPRUND_PATH nullptr
#endif
#ifndef DDPRUN_BENCH_WORKER_PATH
#define DDPRUN_BENCH_WORKER_PATH nullptr
#endif

std::string builtPath(const char* built, const char* sibling) {
  return built != nullptr ? built : (bench::selfDirectory() / sibling).string();
}

void findPrograms(bench::RdzvBench& setup) {
  setup.programs.base_env = bench::launcherBaseEnvironment();
  setup.programs.ddprun = setup.options.ddprun;
  setup.programs.ddprund = setup.options.ddprund;
  setup.programs.worker = setup.options.worker;
  for (const auto& path : {setup.programs.ddprun, setup.programs.ddprund, setup.programs.worker}) {
    if (::access(path.c_str(), X_OK) != 0) {
      throw std::runtime_error("not an executable: " + path +
                               " (build rdzv_bench's dependencies, or name them with "
                               "--ddprun/--ddprund/--worker)");
    }
  }
  if (setup.options.skip_torchrun) {
    return;
  }
  const auto torch = bench::findTorchPython(setup.options.python, setup.scratch.path());
  if (!torch.torch_version.empty()) {
    setup.programs.python = torch.python;
    setup.torch_version = torch.torch_version;
  }
}

std::string describeSetup(const bench::RdzvBench& setup, const std::string& load_before) {
  const bench::RdzvOptions& o = setup.options;
  std::ostringstream out;
  out << "Loopback, one worker per agent (restart_worker: it stamps CLOCK_MONOTONIC at entry). "
      << o.runs << " timed run(s) per launcher and agent count, alternating the launchers "
      << "(rendezvous: after one untimed warm-up run each). ddprun: `ddprun --nnodes N "
         "--rdzv-backend c10d --rdzv-conf is_host=0` against one `ddprund --port 0` per run ("
      << o.ddprun << "). torchrun: `"
      << (setup.programs.python.empty() ? "python3" : setup.programs.python)
      << " -m torch.distributed.run --rdzv_backend c10d --monitor_interval 0.1 -r 9:1 -t 9:1`, "
         "agent 0 with is_host=1 hosting the store on the endpoint, LOGLEVEL=INFO so that it logs "
         "entering the rendezvous (torch "
      << (setup.torch_version.empty() ? "not found" : setup.torch_version)
      << "); run only up to --torchrun-max-agents " << o.torchrun_max_agents
      << " (recovery: --torchrun-recovery-max-agents " << o.torchrun_recovery_max_agents
      << ") and where N × 250 MiB fits in 60% of MemAvailable. Rendezvous latency: the first "
         "N-1 agents start and log that they joined, then the last starts; timed from just "
         "before its fork, so its own start-up (ms for ddprun, a Python interpreter importing "
         "torch for torchrun) is in the figure. Recovery: `--nnodes 1:N --max-restarts 3`, all N "
         "started (the round completes at N, no last call), first workers hold; once all run, "
         "the last agent and its workers get SIGKILL; timed from the kill. torchrun gets "
      << bench::formatNumber("%.0f s", o.torchrun_recovery_timeout_s)
      << " to restart its survivors. " << std::thread::hardware_concurrency()
      << " CPUs, MemAvailable "
      << bench::formatNumber("%.1f GiB", bench::memAvailableMiB() / 1024.0)
      << ". Before: " << load_before << "; after: " << bench::loadAverageText() << ".";
  return out.str();
}

void addOptions(CLI::App& app, bench::RdzvOptions& options) {
  app.add_option("--agents", options.agents, "Agent counts for the rendezvous latency")
      ->delimiter(',')
      ->check(CLI::Range(2, 1024))
      ->capture_default_str();
  app.add_option("--recovery-agents", options.recovery_agents, "Agent counts for recovery")
      ->delimiter(',')
      ->check(CLI::Range(2, 1024))
      ->capture_default_str();
  app.add_option("--runs", options.runs, "Timed runs per launcher and agent count")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--torchrun-max-agents", options.torchrun_max_agents,
                 "Most torchrun agents in a rendezvous run (each takes ~235 MiB)")
      ->capture_default_str();
  app.add_option("--torchrun-recovery-max-agents", options.torchrun_recovery_max_agents,
                 "Most torchrun agents in a recovery run")
      ->capture_default_str();
  app.add_option("--torchrun-recovery-timeout", options.torchrun_recovery_timeout_s,
                 "Seconds torchrun's survivors get to restart after the kill")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--timeout", options.timeout_s,
                 "Seconds one run may take (recovery: plus the recovery wait)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_flag("--skip-torchrun", options.skip_torchrun, "Measure ddprun only");
  app.add_option("--ddprun", options.ddprun, "The ddprun executable")->capture_default_str();
  app.add_option("--ddprund", options.ddprund, "The ddprund executable")->capture_default_str();
  app.add_option("--worker", options.worker, "restart_worker")->capture_default_str();
  app.add_option("--python", options.python,
                 "Interpreter for torchrun (default: the first python3 or python on PATH that "
                 "can import torch)");
}

}  // namespace

int main(int argc, char** argv) try {
  bench::RdzvOptions options;
  options.ddprun = builtPath(DDPRUN_BENCH_DDPRUN_PATH, "ddprun");
  options.ddprund = builtPath(DDPRUN_BENCH_DDPRUND_PATH, "ddprund");
  options.worker = builtPath(DDPRUN_BENCH_WORKER_PATH, "restart_worker");
  CLI::App app{"ddprun's elastic rendezvous against torchrun's c10d: latency and recovery"};
  addOptions(app, options);
  CLI11_PARSE(app, argc, argv);

  const std::string load_before = bench::loadAverageText();
  bench::raiseFdLimit();  // inherited: ddprund holds three connections per agent
  bench::RdzvBench setup;
  setup.options = options;
  findPrograms(setup);
  if (!options.skip_torchrun && setup.programs.python.empty()) {
    setup.report.notes.push_back("no interpreter here can import torch: torchrun not measured");
  }
  bench::measureRendezvous(setup);
  bench::measureRecovery(setup);
  setup.report.setup = describeSetup(setup, load_before);
  bench::printRdzvReport(std::cout, setup.report);
  return 0;
} catch (const std::exception& error) {
  std::cerr << "rdzv_bench: " << error.what() << '\n';
  return 1;
}

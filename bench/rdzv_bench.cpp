// rdzv_bench: ddprun's elastic rendezvous, with its c10d backend (agents
// joined through an external ddprund) and its etcd-v3 backend (a 3-member
// etcd cluster started once by the benchmark), against torchrun's c10d
// rendezvous (agent 0 hosting the store), side by side in one run on
// loopback, printed as Markdown tables with every figure and the ratios:
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
//     etcd's survivors learn of it when the lost agent's lease expires, so
//     its figure is judged against the lease TTL.
//
// Workers are restart_worker's `rdzv` mode: each stamps CLOCK_MONOTONIC at
// entry, which is steady_clock here, so stamps and fork times compare
// directly. Runs alternate between the launchers, so load from elsewhere
// falls on both alike. Any run that goes wrong ends the benchmark with one
// line naming the run and its log (kept after exit), and status 1.

#include <CLI/CLI.hpp>
#include <exception>
#include <iostream>
#include <string>

#include "machine.hpp"
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
  app.add_flag("--skip-etcd", options.skip_etcd,
               "Leave out ddprun's etcd-v3 backend (else a 3-member etcd cluster is started)");
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
  options.ddprun = bench::builtPath(DDPRUN_BENCH_DDPRUN_PATH, "ddprun");
  options.ddprund = bench::builtPath(DDPRUN_BENCH_DDPRUND_PATH, "ddprund");
  options.worker = bench::builtPath(DDPRUN_BENCH_WORKER_PATH, "restart_worker");
  CLI::App app{"ddprun's elastic rendezvous against torchrun's c10d: latency and recovery"};
  addOptions(app, options);
  CLI11_PARSE(app, argc, argv);
  bench::runRdzvBench(options, std::cout);
  return 0;
} catch (const std::exception& error) {
  std::cerr << "rdzv_bench: " << error.what() << '\n';
  return 1;
}

// rdzv_scale: ddprund's elastic rendezvous at 128, 1,000 and 10,000 agents,
// without that many machines: N simulated agents in this one process
// (agent_swarm.hpp) go through one job against a fresh ddprund per N, with
// the requests the real agent sends. For each N it times:
//
//   join_to_round_ms: from the write of the last join (the N-1 before it
//     already placed) until every agent holds its round event; node 0 is
//     told first and must send store_ready before the others are told, as
//     in a real job, so that round trip is in the figure.
//   recovery_ms: one member (group rank N/2 unless --victim-rank) has both
//     its connections closed; until every survivor holds the new round (again
//     through its node 0's store_ready).
//   done_to_finished_ms: every survivor reports done; from the last done's
//     write until every survivor is told finished. Each then closes the job
//     and must be told closed.
//
// and reads ddprund's CPU time (user + system) and peak RSS (VmHWM) over the
// whole run. Every agent's events are checked: one round event per round,
// group ranks 0..M-1 once each, the sizes, node 0's store. Each N ends with
// one line `agents=N join_to_round_ms=X recovery_ms=Y daemon_rss_mib=Z
// daemon_cpu_s=W ...`; the Markdown table and the targets follow.
//
// Then, unless --skip-store, the store at scale (store_scale.hpp): the
// ADD+WAIT barrier at 100,000 connections, the server's CPU per operation
// beside LibTorch's server, and how ddprund's cost grows with clients, each
// beside its target, so one run prints every figure of the scale targets.
//
// This file only reads the flags. Exit status: 0 when every N ran (targets
// missed or not: the table says), 1 with one line when a run failed
// (ddprund died, a phase ran past --phase-timeout, an agent was told
// something wrong), 2 for bad flags.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <exception>
#include <iostream>
#include <string>

#include "machine.hpp"
#include "rdzv_scale_runs.hpp"
#include "store_scale.hpp"

namespace bench = ddprun::bench;

namespace {

#ifndef DDPRUN_BENCH_DDPRUND_PATH
#define DDPRUN_BENCH_DDPRUND_PATH nullptr
#endif

// What the store half of the run needs beside the agents' options.
struct StoreHalf {
  bool skip = false;
  bench::StoreScaleOptions options;
};

void addStoreOptions(CLI::App& app, StoreHalf& store) {
  app.add_flag("--skip-store", store.skip,
               "Only the agents: no store barrier, CPU per operation or growth tables");
  app.add_option("--store-clients", store.options.barrier_connections,
                 "Connections in the store's ADD+WAIT barrier")
      ->check(CLI::Range(2, 1'000'000))
      ->capture_default_str();
  app.add_option("--store-growth", store.options.growth,
                 "Store connection counts of the growth table, comma-separated")
      ->delimiter(',')
      ->check(CLI::Range(2, 1'000'000))
      ->capture_default_str();
  app.add_option("--store-cpu-connections", store.options.cpu_connections,
                 "Connections of the raw load the CPU per operation is measured under")
      ->delimiter(',')
      ->check(CLI::Range(1, 65535))
      ->capture_default_str();
  app.add_option("--store-cpu-seconds", store.options.duration_s,
                 "Measured seconds of each raw load run (after a warm-up of a third as long)")
      ->check(CLI::Range(0.01, 3600.0))
      ->capture_default_str();
  app.add_option("--store-repeat", store.options.repeat,
                 "Raw load runs per server, alternating; the median is shown")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();
  app.add_option("--libtorch-server", store.options.libtorch_server,
                 "LibTorch's TCPStore server helper (built with LibTorch; missing: its rows say "
                 "so)")
      ->capture_default_str();
  app.add_option("--echo-floor", store.options.echo_floor,
                 "The echo_floor helper: the raw load's floor, what the kernel alone costs "
                 "(missing: its columns say so)")
      ->capture_default_str();
}

void addOptions(CLI::App& app, bench::ScaleOptions& options) {
  app.add_option("--agents", options.agents, "Agent counts, comma-separated; a fresh ddprund each")
      ->delimiter(',')
      ->check(CLI::Range(2, 1'000'000))
      ->capture_default_str();
  app.add_option("--local-world-size", options.local_world_size, "Workers each agent announces")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  app.add_option("--keep-alive-interval", options.keep_alive_interval_s,
                 "Seconds between an agent's heartbeats (default: ddprun's, 5)")
      ->check(CLI::Range(0.001, 3600.0));
  app.add_option("--keep-alive-max-attempt", options.keep_alive_max_attempt,
                 "Heartbeats missed before the daemon drops an agent (default: ddprun's, 3)")
      ->check(CLI::Range(1, 1000));
  app.add_option("--last-call-timeout", options.last_call_timeout_s,
                 "Seconds the round waits after N-1 joins; long, so that it completes at the "
                 "N-th join")
      ->check(CLI::Range(0.0, 1e6))
      ->capture_default_str();
  app.add_option("--connect-window", options.connect_window, "Connections being opened at once")
      ->check(CLI::Range(1, 65535))
      ->capture_default_str();
  app.add_option("--source-addresses", options.source_addresses,
                 "127.0.0.x source addresses to spread connections over (0: one per 16,384 "
                 "connections)")
      ->check(CLI::Range(0, 254))
      ->capture_default_str();
  app.add_option("--hold", options.hold_s,
                 "Seconds the job runs, heartbeating, between its first round and the loss "
                 "(default: one keep-alive interval)")
      ->check(CLI::Range(0.0, 1e6));
  app.add_option("--victim-rank", options.victim_rank,
                 "Group rank of the member lost in the recovery (0 is node 0; default: N/2)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--phase-timeout", options.phase_timeout_s,
                 "Seconds each phase (connect, join, round, recovery, exit barrier) may take")
      ->check(CLI::Range(0.001, 1e6))
      ->capture_default_str();
  app.add_option("--ddprund", options.ddprund, "The ddprund executable")->capture_default_str();
  app.add_option("--ddprund-threads", options.ddprund_threads, "Passed to ddprund --threads")
      ->check(CLI::Range(1, 256))
      ->capture_default_str();
}

// What CLI11 cannot check alone: the lost member must be one of every N's.
void checkVictim(const bench::ScaleOptions& options) {
  const int smallest = *std::min_element(options.agents.begin(), options.agents.end());
  if (options.victim_rank && *options.victim_rank >= smallest) {
    throw CLI::ValidationError("--victim-rank", std::to_string(*options.victim_rank) +
                                                    " is not a group rank of " +
                                                    std::to_string(smallest) + " agents");
  }
}

}  // namespace

int main(int argc, char** argv) {
  bench::ScaleOptions options;
  options.ddprund = bench::builtPath(DDPRUN_BENCH_DDPRUND_PATH, "ddprund");
  StoreHalf store;
  store.options.libtorch_server = bench::selfDirectory() / "libtorch_store_server";
  store.options.echo_floor = bench::selfDirectory() / "echo_floor";
  CLI::App app{
      "ddprund at scale: its rendezvous with N simulated agents (round, recovery, exit "
      "barrier), then its store with up to 100,000 clients"};
  addOptions(app, options);
  addStoreOptions(app, store);
  try {
    app.parse(argc, argv);
    checkVictim(options);
  } catch (const CLI::ParseError& error) {
    if (error.get_exit_code() == 0) {
      return app.exit(error);  // --help
    }
    // One line naming the flag and what is wrong with it.
    const std::string what = error.what();
    std::cerr << "rdzv_scale: " << what.substr(0, what.find('\n')) << '\n';
    return 2;
  }
  try {
    bench::runRdzvScale(options, std::cout);
    if (!store.skip) {
      store.options.ddprund = options.ddprund;
      store.options.ddprund_threads = options.ddprund_threads;
      store.options.warmup_s = store.options.duration_s / 3;
      std::cout << "\n## The store at scale\n";
      bench::runStoreScale(store.options, std::cout);
    }
    return 0;
  } catch (const std::exception& error) {
    std::cerr << "rdzv_scale: " << error.what() << '\n';
    return 1;
  }
}

// ddprund_soak: whether ddprund, run for months, holds only what its recent
// jobs left. One real ddprund with a short --run-retention; --jobs jobs of
// 2 to 8 simulated agents each (agent_swarm.hpp) through the real protocol,
// one after another: joins, rounds, one job in ten restarting and one in
// ten losing an agent, the exit barrier, the agents acknowledging their
// events; the metrics scraped and the status questions asked every
// --probe-every jobs. Then it idles past the retention and prints
//
//   jobs=N rss_start_mib=A rss_end_mib=B rss_growth_kib_per_1k_jobs=C
//   keys_end=K runs_end=R
//
// (keys and runs read from ddprund's own metrics, ddprund_keys and
// ddprund_jobs), and the targets: keys and runs back to a fresh daemon's,
// and at most 64 KiB of RSS growth per 1,000 jobs (soak_runs.hpp says how
// the two RSS figures are taken).
//
// This file only reads the flags. Exit status: 0 when both targets were
// met, 3 when the run completed but missed one, 1 with one line when it
// failed (ddprund died, a job ran past --job-timeout), 2 for bad flags.
#include <CLI/CLI.hpp>
#include <exception>
#include <iostream>
#include <string>

#include "machine.hpp"
#include "soak_runs.hpp"

namespace bench = ddprun::bench;

namespace {

#ifndef DDPRUN_BENCH_DDPRUND_PATH
#define DDPRUN_BENCH_DDPRUND_PATH nullptr
#endif

void addOptions(CLI::App& app, bench::SoakOptions& options) {
  app.add_option("--jobs", options.jobs, "Jobs run against the one ddprund")
      ->check(CLI::Range(std::size_t{1}, std::size_t{100'000'000}))
      ->capture_default_str();
  app.add_option("--warmup-jobs", options.warmup_jobs,
                 "Jobs run before the first RSS figure (at most a tenth of --jobs)")
      ->capture_default_str();
  app.add_option("--probe-every", options.probe_every,
                 "Jobs between two scrapes of the metrics and status questions")
      ->check(CLI::Range(std::size_t{1}, std::size_t{100'000'000}))
      ->capture_default_str();
  app.add_option("--run-retention", options.run_retention_s,
                 "Passed to ddprund --run-retention: seconds a closed run is kept")
      ->check(CLI::Range(0.001, 3600.0))
      ->capture_default_str();
  app.add_option("--job-timeout", options.job_timeout_s, "Seconds one job may take")
      ->check(CLI::Range(0.001, 1e6))
      ->capture_default_str();
  app.add_option("--ddprund", options.ddprund, "The ddprund executable")->capture_default_str();
}

}  // namespace

int main(int argc, char** argv) {
  bench::SoakOptions options;
  options.ddprund = bench::builtPath(DDPRUN_BENCH_DDPRUND_PATH, "ddprund");
  CLI::App app{
      "ddprund soak: many short jobs against one daemon, then idle past --run-retention: what "
      "it still holds, and how its resident memory grew"};
  addOptions(app, options);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    if (error.get_exit_code() == 0) {
      return app.exit(error);  // --help
    }
    // One line naming the flag and what is wrong with it.
    const std::string what = error.what();
    std::cerr << "ddprund_soak: " << what.substr(0, what.find('\n')) << '\n';
    return 2;
  }
  try {
    return bench::runSoak(options, std::cout) ? 0 : 3;
  } catch (const std::exception& error) {
    std::cerr << "ddprund_soak: " << error.what() << '\n';
    return 1;
  }
}

// store_bench: ddprund against LibTorch's own TCPStore server under the
// same load, printed as Markdown tables (see store_runs.hpp). This file only
// reads the flags.
#include <CLI/CLI.hpp>
#include <exception>
#include <iostream>
#include <string>

#include "machine.hpp"
#include "store_runs.hpp"

namespace bench = ddprun::bench;

namespace {

// Built next to ddprund in the same build tree unless told otherwise.
std::string defaultDdprund() {
#ifdef DDPRUN_BENCH_DDPRUND_PATH
  return DDPRUN_BENCH_DDPRUND_PATH;
#else
  return (bench::selfDirectory() / ".." / "rendezvous" / "ddprund").lexically_normal().string();
#endif
}

void addOptions(CLI::App& app, bench::StoreOptions& options) {
  app.add_option("--duration", options.duration_s, "Measured seconds per load point")
      ->capture_default_str();
  app.add_option("--warmup", options.warmup_s, "Warm-up seconds per load point")
      ->capture_default_str();
  app.add_option("--repeat", options.repeat,
                 "Runs per point, alternating the servers; the median run by ops/s is shown")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--clients", options.clients, "Client counts, comma-separated")
      ->delimiter(',')
      ->capture_default_str();
  app.add_option("--barrier-clients", options.barrier_clients, "Connections in the barrier")
      ->capture_default_str();
  app.add_option("--barrier-window", options.barrier_window,
                 "Connections in flight while connecting")
      ->capture_default_str();
  app.add_option("--barrier-sources", options.barrier_sources,
                 "127.0.0.x source addresses to spread barrier connections over")
      ->capture_default_str();
  app.add_option("--barrier-timeout", options.barrier_timeout_s,
                 "Seconds each barrier phase (connect, barrier) may take")
      ->capture_default_str();
  app.add_flag("--skip-barrier", options.skip_barrier, "Skip the barrier");
  app.add_flag("--skip-load", options.skip_load, "Skip the key-value load");
  app.add_flag("--detail", options.detail, "Also print tail percentiles and per-client fairness");
  app.add_flag("--raw-load", options.raw_load,
               "Also run the mix from a cheap epoll client (shows server capacity when "
               "LibTorch's client is the bottleneck)");
  app.add_option("--ddprund", options.ddprund, "The ddprund executable")->capture_default_str();
  app.add_option("--libtorch-server", options.libtorch_server, "The libtorch_store_server helper")
      ->capture_default_str();
  app.add_option("--ddprund-threads", options.ddprund_threads, "Passed to ddprund --threads")
      ->capture_default_str();
}

}  // namespace

int main(int argc, char** argv) try {
  bench::StoreOptions options;
  options.ddprund = defaultDdprund();
  options.libtorch_server = (bench::selfDirectory() / "libtorch_store_server").string();
  CLI::App app{"Compares ddprund with LibTorch's TCPStore server under the same load"};
  addOptions(app, options);
  CLI11_PARSE(app, argc, argv);
  bench::runStoreBench(options, std::cout);
  return 0;
} catch (const std::exception& error) {
  std::cerr << "store_bench: " << error.what() << '\n';
  return 1;
}

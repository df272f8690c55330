// store_bench: ddprund against LibTorch's own TCPStore server under the
// same load, then the store at scale (100,000-connection barrier, server CPU
// per operation beside the echo floor's, growth) and requests of many keys,
// printed as Markdown tables (see store_runs.hpp and store_scale.hpp). This
// file only reads the flags.
#include <CLI/CLI.hpp>
#include <exception>
#include <iostream>
#include <string>
#include <vector>

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
  app.add_option("--raw-clients", options.raw_clients,
                 "Connection counts of the raw epoll-client load (the server CPU per operation "
                 "table), comma-separated")
      ->delimiter(',')
      ->capture_default_str();
  app.add_flag_callback(
      "--raw-load", [&options] { options.raw_clients = options.clients; },
      "Run the raw load at every --clients count");
  app.add_option("--barrier-clients", options.barrier_clients, "Connections in the barrier")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option_function<std::vector<std::string>>(
         "--barrier-bytes",
         [&options](const std::vector<std::string>& names) {
           options.barrier_bytes.clear();
           for (const auto& name : names) {
             options.barrier_bytes.push_back(name == "2.x" ? bench::BarrierBytes::Torch2x
                                                           : bench::BarrierBytes::Torch113);
           }
         },
         "Request bytes of the barrier, comma-separated: 1.13, 2.x (default both; LibTorch "
         "1.13's server runs only 1.13)")
      ->delimiter(',')
      ->check(CLI::IsMember({"1.13", "2.x"}));
  app.add_option("--barrier-window", options.barrier_window,
                 "Connects in flight at once (never more than net.core.somaxconn)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--barrier-sources", options.barrier_sources,
                 "127.0.0.x source addresses to spread connections over (0: as many as the "
                 "ephemeral port range needs)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--barrier-timeout", options.barrier_timeout_s,
                 "Deadline in seconds of each phase (connect, barrier) of each barrier run; a "
                 "server is reported as far as it got")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--growth", options.growth,
                 "Connection counts of ddprund's growth table, comma-separated")
      ->delimiter(',')
      ->capture_default_str();
  app.add_option("--big-request-keys", options.big_request_keys,
                 "Key counts of the large-request table (one MULTI_SET, CHECK, WAIT and "
                 "MULTI_GET each, --repeat times), comma-separated")
      ->delimiter(',')
      ->capture_default_str();
  app.add_flag("--skip-barrier", options.skip_barrier, "Skip the barrier");
  app.add_flag("--skip-load", options.skip_load,
               "Skip both key-value loads (LibTorch clients and the raw load)");
  app.add_flag("--skip-client-load", options.skip_client_load,
               "Skip the LibTorch-client load (the raw load still runs)");
  app.add_flag("--skip-growth", options.skip_growth, "Skip the growth table");
  app.add_flag("--skip-big-requests", options.skip_big_requests, "Skip the large-request table");
  app.add_flag("--detail", options.detail, "Also print tail percentiles and per-client fairness");
  app.add_option("--ddprund", options.ddprund, "The ddprund executable")->capture_default_str();
  app.add_option("--libtorch-server", options.libtorch_server, "The libtorch_store_server helper")
      ->capture_default_str();
  app.add_option("--echo-floor", options.echo_floor,
                 "The echo_floor helper: the raw load's floor, what the kernel alone costs")
      ->capture_default_str();
  app.add_option("--ddprund-threads", options.ddprund_threads, "Passed to ddprund --threads")
      ->capture_default_str();
}

}  // namespace

int main(int argc, char** argv) try {
  bench::StoreOptions options;
  options.ddprund = defaultDdprund();
  options.libtorch_server = (bench::selfDirectory() / "libtorch_store_server").string();
  options.echo_floor = (bench::selfDirectory() / "echo_floor").string();
  CLI::App app{"Compares ddprund with LibTorch's TCPStore server under the same load"};
  addOptions(app, options);
  CLI11_PARSE(app, argc, argv);
  bench::runStoreBench(options, std::cout);
  return 0;
} catch (const std::exception& error) {
  std::cerr << "store_bench: " << error.what() << '\n';
  return 1;
}

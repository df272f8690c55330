// ddprund: the rendezvous daemon. Parses flags, starts a Server, waits for
// SIGTERM/SIGINT, stops it. Exit codes: 0 clean stop, 1 runtime failure,
// 2 bad flags.
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <csignal>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ddprun/metrics/registry.hpp"
#include "ddprun/proto/cli_args.hpp"
#include "ddprun/proto/errors.hpp"
#include "ddprun/rendezvous/metrics_endpoint.hpp"
#include "ddprun/rendezvous/rendezvous_service.hpp"
#include "ddprun/rendezvous/server.hpp"
#include "ddprun/rendezvous/token_file.hpp"
#include "ddprun/version.hpp"
#include "descriptor_limit.hpp"
#include "log.hpp"

namespace {

using ddprun::rdzv::ServerOptions;

struct DaemonFlags {
  ServerOptions server;
  std::string port_file;
  std::optional<std::uint16_t> metrics_port;  // none: no metrics endpoint
  std::optional<std::string> metrics_host;    // none: --host's address
  std::string metrics_port_file;
  std::string token_file;
  std::string legacy_dialect = "1.13";
  double request_timeout_s = 30;
  double idle_run_timeout_s =
      std::chrono::duration<double>(ddprun::rdzv::RendezvousService::kDefaultIdleRunTimeout)
          .count();
  double run_retention_s =
      std::chrono::duration<double>(ddprun::rdzv::RendezvousService::kDefaultRunRetention).count();
  std::string log_level = "info";
};

// --request-timeout, --idle-run-timeout, --run-retention: seconds, kept in milliseconds by the
// server, so at least one millisecond and small enough to convert (1e9 s, as
// ddprun's timeouts).
std::string checkSeconds(const std::string& text) {
  std::size_t used = 0;
  double seconds = 0;
  try {
    seconds = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size()) {
    return "'" + text + "' is not a number of seconds";
  }
  if (!(seconds >= 0.001 && seconds <= 1e9)) {
    return "'" + text + "' must be between 0.001 and 1e9 seconds";
  }
  return "";
}

// Returns the one option whose empty value has a meaning: --host "" is every
// address, as when it is left out.
const CLI::Option* defineFlags(CLI::App& app, DaemonFlags& flags) {
  auto& s = flags.server;
  const CLI::Option* host =
      app.add_option("--host", s.host, "Address to listen on (default: all, IPv6 and IPv4)");
  app.add_option("--port", s.port, "TCP port; 0 picks a free one and prints it")
      ->capture_default_str();
  app.add_option("--threads", s.threads, "I/O threads")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  app.add_option("--port-file", flags.port_file, "Write the port to this file once listening");
  app.add_option("--token-file", flags.token_file,
                 "Agents must prove they hold this file's token to join a rendezvous");
  app.add_option("--legacy-dialect", flags.legacy_dialect,
                 "Clients without a VALIDATE handshake speak 1.13 (also 2.0) or 2.1")
      ->check(CLI::IsMember({"1.13", "2.1"}))
      ->capture_default_str();
  app.add_option("--request-timeout", flags.request_timeout_s,
                 "Seconds a started request may stay incomplete before the connection is closed")
      ->check(CLI::Validator(checkSeconds, "SECONDS", "seconds"))
      ->capture_default_str();
  app.add_option("--max-key-bytes", s.limits.max_key_bytes, "Longest key a client may send, bytes")
      ->capture_default_str();
  app.add_option("--max-value-bytes", s.limits.max_value_bytes,
                 "Largest value a client may send, bytes")
      ->capture_default_str();
  app.add_option("--max-keys", s.limits.max_keys_per_request, "Most keys in one request")
      ->capture_default_str();
  app.add_option("--max-request-bytes", s.limits.max_request_bytes,
                 "Largest request a client may send, bytes")
      ->check(CLI::Range(std::size_t{16}, std::numeric_limits<std::size_t>::max()))
      ->capture_default_str();
  app.add_option("--max-memory", s.max_memory_bytes,
                 "What the store may hold in all: keys, values, queued items and 96 bytes of "
                 "bookkeeping per key; a write past it is refused and its connection closed "
                 "(bytes, or with a unit: 512MiB, 2GiB)")
      ->transform(CLI::AsSizeValue(/*kb_is_1000=*/true))
      ->check(CLI::Range(std::size_t{1}, std::numeric_limits<std::size_t>::max()))
      ->capture_default_str();
  app.add_option("--idle-run-timeout", flags.idle_run_timeout_s,
                 "Seconds an open elastic run may go with no agent connected before it is closed "
                 "and forgotten (an agent that comes back later rejoins it afresh)")
      ->check(CLI::Validator(checkSeconds, "SECONDS", "seconds"))
      ->capture_default_str();
  app.add_option("--run-retention", flags.run_retention_s,
                 "Seconds a closed elastic run is kept, for ddprun status, before it is "
                 "forgotten with its events (at most 4096 closed runs are kept)")
      ->check(CLI::Validator(checkSeconds, "SECONDS", "seconds"))
      ->capture_default_str();
  app.add_option("--log-level", flags.log_level, "Least severe log message written to stderr")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "off"}))
      ->capture_default_str();
  app.add_option("--metrics-port", flags.metrics_port,
                 "Serve Prometheus metrics (/metrics) and /healthz over HTTP on this port, never "
                 "the store's; 0 picks a free one (default: no metrics)");
  app.add_option("--metrics-host", flags.metrics_host,
                 "Address the metrics listen on (default: --host's, all when --host is not given)");
  app.add_option("--metrics-port-file", flags.metrics_port_file,
                 "Write the metrics port to this file once listening");
  return host;
}

// The store's port would be taken by the store: the metrics never share it.
void checkMetricsFlags(const DaemonFlags& flags) {
  if (!flags.metrics_port && (flags.metrics_host || !flags.metrics_port_file.empty())) {
    throw ddprun::ConfigError(
        std::string(flags.metrics_host ? "--metrics-host" : "--metrics-port-file") +
        " needs --metrics-port");
  }
  if (flags.metrics_port && *flags.metrics_port != 0 && *flags.metrics_port == flags.server.port) {
    throw ddprun::ConfigError("--metrics-port " + std::to_string(*flags.metrics_port) +
                              ": the store's port (--port); the metrics need a port of their own");
  }
}

// Written to a temporary name and renamed, so readers never see a partial file.
void writePortFile(const std::string& path, std::uint16_t port) {
  const std::string temporary = path + ".tmp";
  {
    std::ofstream out(temporary, std::ios::trunc);
    out << port << '\n';
    if (!out.flush()) {
      throw ddprun::ConfigError("cannot write --port-file '" + path + "'");
    }
  }
  std::filesystem::rename(temporary, path);
}

// Logged once listening: a daemon that cannot start says only why.
void logDescriptorLimit(spdlog::logger& log, const ddprun::rdzv::DescriptorLimit& limit) {
  if (!limit.failure.empty()) {
    log.warn(
        "cannot raise the file descriptor limit (RLIMIT_NOFILE) above {}: {}; at most that "
        "many clients at once",
        limit.now, limit.failure);
  } else if (limit.now != limit.before) {
    log.info("file descriptor limit (RLIMIT_NOFILE) {}, raised from {}", limit.now, limit.before);
  } else {
    log.info("file descriptor limit (RLIMIT_NOFILE) {}", limit.now);
  }
}

// Blocks until SIGTERM or SIGINT. The signals are blocked in every thread
// (the mask is inherited by the server's threads), so only sigwait sees them.
int waitForStopSignal(const sigset_t& signals) {
  int signal_number = 0;
  sigwait(&signals, &signal_number);
  return signal_number;
}

// Everything main() does; what it does not catch itself is main()'s.
int runDaemon(int argc, char** argv) {
  CLI::App app("ddprund: a c10d TCPStore-compatible rendezvous store (PyTorch 1.13 to 2.10+)",
               argv[0]);
  DaemonFlags flags;
  const CLI::Option* host = defineFlags(app, flags);
  app.set_version_flag("--version", std::string("ddprund (ddprun) ") + ddprun::kVersion,
                       "Print ddprund's version and exit");
  try {
    // "--token-file=" is "" as in argparse, refused (an unset variable must
    // not run an open daemon), never the next argument.
    std::vector<std::string> args =
        ddprun::proto::readAsArgparse(app, {argv + 1, argv + argc}, {host});
    std::reverse(args.begin(), args.end());  // CLI11's vector overload expects reversed order
    app.parse(args);
  } catch (const CLI::ParseError& error) {
    if (error.get_exit_code() == 0) {
      return app.exit(error);  // --help, --version
    }
    // One line naming the flag and what is wrong with it; exit 2, as ddprun.
    const std::string what = error.what();
    std::fprintf(stderr, "ddprund: %s\n", what.substr(0, what.find('\n')).c_str());
    return 2;
  }

  auto& log = ddprun::rdzv::rdzvLog();
  log.set_level(spdlog::level::from_str(flags.log_level));
  flags.server.legacy_dialect = flags.legacy_dialect == "2.1" ? ddprun::proto::Dialect::Legacy21
                                                              : ddprun::proto::Dialect::Legacy113;
  flags.server.request_timeout =
      std::chrono::milliseconds(static_cast<long>(flags.request_timeout_s * 1000));
  flags.server.idle_run_timeout =
      std::chrono::milliseconds(static_cast<long>(flags.idle_run_timeout_s * 1000));
  flags.server.run_retention =
      std::chrono::milliseconds(static_cast<long>(flags.run_retention_s * 1000));

  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);
  // Each client connection holds a descriptor: raised before anything is
  // accepted.
  const auto descriptor_limit = ddprun::rdzv::raiseDescriptorLimit();
  // The time zone is read now, not by the first timestamped log line: that
  // opens /etc/localtime, a descriptor held for a moment after the port is
  // announced, which a client then finds taken under a tight RLIMIT_NOFILE.
  tzset();

  try {
    if (!flags.token_file.empty()) {
      const auto token = ddprun::rdzv::readTokenFile("--token-file", flags.token_file);
      if (token.warning) {
        log.warn("{}", *token.warning);
      }
      flags.server.token = token.secret;
    }
    checkMetricsFlags(flags);
    ddprun::rdzv::Server server(flags.server);
    ddprun::metrics::Registry registry;
    registry.add([&server](ddprun::metrics::Exposition& out) { server.collectMetrics(out); });
    std::unique_ptr<ddprun::rdzv::MetricsEndpoint> metrics;
    if (flags.metrics_port) {
      metrics = std::make_unique<ddprun::rdzv::MetricsEndpoint>(
          ddprun::rdzv::MetricsEndpointOptions{
              flags.metrics_host.value_or(flags.server.host), *flags.metrics_port, {}},
          registry);
    }
    server.start();
    std::printf("ddprund listening on %s\n", server.listenAddress().c_str());
    std::fflush(stdout);
    if (!flags.port_file.empty()) {
      writePortFile(flags.port_file, server.port());
    }
    log.info("listening on {} ({} thread(s))", server.listenAddress(), flags.server.threads);
    logDescriptorLimit(log, descriptor_limit);
    if (metrics) {
      metrics->start();
      if (!flags.metrics_port_file.empty()) {
        writePortFile(flags.metrics_port_file, metrics->port());
      }
      log.info("serving metrics on http://{}/metrics", metrics->listenAddress());
    }
    const int signal_number = waitForStopSignal(signals);
    log.info("received {}; stopping", strsignal(signal_number));
    if (metrics) {
      metrics->stop();
    }
    server.stop();
    return 0;
  } catch (const ddprun::ConfigError& error) {
    std::fprintf(stderr, "ddprund: %s\n", error.what());
    return 2;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "ddprund: %s\n", error.what());
    return 1;
  }
}

}  // namespace

// Exit statuses as docs/ddprund.md says: 0 a clean stop, 2 bad flags, 1 any
// other failure, one outside runDaemon()'s own handlers (CLI11 defining the
// flags, the logger, an exception of no std type) included, so that no
// exception ends the daemon through std::terminate.
int main(int argc, char** argv) {
  try {
    return runDaemon(argc, argv);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "ddprund: %s\n", error.what());
    return 1;
  } catch (...) {
    std::fprintf(stderr, "ddprund: failed with an exception of unknown type\n");
    return 1;
  }
}

#include "soak_runs.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>

#include "ddprun/test_support/port_file.hpp"
#include "ddprun/test_support/proc_status.hpp"
#include "ddprun/test_support/temp_dir.hpp"
#include "machine.hpp"
#include "servers.hpp"
#include "soak_jobs.hpp"

namespace ddprun::bench {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

// The target: what a job leaves behind once it is forgotten.
constexpr double kMaxGrowthKibPer1kJobs = 64;
// How often the idle daemon is asked whether it is back to empty.
constexpr auto kIdlePoll = 200ms;

std::string fixed(double value, int decimals) {
  char text[64];
  std::snprintf(text, sizeof(text), "%.*f", decimals, value);
  return text;
}

double residentMiB(pid_t pid) {
  return static_cast<double>(test_support::procStatusKiB(pid, "VmRSS").value_or(0)) / 1024.0;
}

// The daemon with a short retention and its metrics on a port of its own.
class SoakDaemon {
 public:
  SoakDaemon(const SoakOptions& options, const test_support::TempDir& scratch)
      : server_(ServerKind::Ddprund, configFor(options, scratch), scratch) {
    const auto port = test_support::waitForPortFile(metricsPortFile(scratch), server_.child(),
                                                    std::chrono::seconds(20));
    if (!port) {
      throw std::runtime_error("ddprund wrote no metrics port: " + server_.ended(1s));
    }
    probe_.emplace(server_.port(), *port);
  }

  RunningServer& server() { return server_; }
  DaemonHolding probe(const std::string& run_id) const { return probe_->probe(run_id); }

  // Polls until the daemon holds no more than `fresh`, or `timeout` passes;
  // what it holds then.
  DaemonHolding idleUntilEmpty(const DaemonHolding& fresh, std::chrono::milliseconds timeout) {
    const auto deadline = Clock::now() + timeout;
    DaemonHolding held = probe("");
    while ((held.keys > fresh.keys || held.runs > fresh.runs) && Clock::now() < deadline) {
      std::this_thread::sleep_for(kIdlePoll);  // a benchmark's idle wait, not a test's
      held = probe("");
    }
    return held;
  }

 private:
  static std::filesystem::path metricsPortFile(const test_support::TempDir& scratch) {
    return scratch.path() / "metrics.port";
  }
  static ServerConfig configFor(const SoakOptions& options, const test_support::TempDir& scratch) {
    ServerConfig config;
    config.ddprund = options.ddprund;
    config.ddprund_args = {"--run-retention",     fixed(options.run_retention_s, 3),
                           "--metrics-port",      "0",
                           "--metrics-port-file", metricsPortFile(scratch).string()};
    return config;
  }

  RunningServer server_;
  std::optional<SoakProbe> probe_;
};

void runJobs(std::size_t first, std::size_t end, const SoakOptions& options, SoakDaemon& daemon,
             std::ostream& out) {
  SoakTarget target;
  target.port = daemon.server().port();
  target.daemon_ended = [&daemon] { return daemon.server().ended(500ms); };
  target.job_timeout = std::chrono::milliseconds(static_cast<long>(options.job_timeout_s * 1000));
  const std::size_t report_every = std::max<std::size_t>(1, options.jobs / 10);
  for (std::size_t index = first; index < end; ++index) {
    const SoakJob job = soakJob(index);
    runSoakJob(job, target);
    if ((index + 1) % options.probe_every == 0) {
      daemon.probe(job.run_id);
    }
    if ((index + 1) % report_every == 0) {
      const DaemonHolding held = daemon.probe("");
      out << "# " << index + 1 << " jobs: ddprund holds " << held.keys << " keys, " << held.runs
          << " runs, " << fixed(residentMiB(daemon.server().pid()), 1) << " MiB resident; "
          << loadAverageText() << std::endl;
    }
  }
}

}  // namespace

bool runSoak(const SoakOptions& options, std::ostream& out) {
  test_support::TempDir scratch("ddprund_soak");
  SoakDaemon daemon(options, scratch);
  const auto idle_bound =
      std::chrono::milliseconds(static_cast<long>(options.run_retention_s * 1000)) + 60s;
  out << "# ddprund_soak: " << options.jobs << " jobs, --run-retention "
      << fixed(options.run_retention_s, 3) << "; " << machineText() << std::endl;
  const DaemonHolding fresh = daemon.probe("");
  const std::size_t warmup = std::min(options.warmup_jobs, options.jobs / 10);
  runJobs(0, warmup, options, daemon, out);
  daemon.idleUntilEmpty(fresh, idle_bound);
  const double rss_start = residentMiB(daemon.server().pid());

  runJobs(warmup, options.jobs, options, daemon, out);
  const DaemonHolding end = daemon.idleUntilEmpty(fresh, idle_bound);
  const double rss_end = residentMiB(daemon.server().pid());
  const std::size_t measured = options.jobs - warmup;
  const double growth =
      measured == 0 ? 0 : (rss_end - rss_start) * 1024.0 / (static_cast<double>(measured) / 1000);
  out << "jobs=" << options.jobs << " rss_start_mib=" << fixed(rss_start, 1)
      << " rss_end_mib=" << fixed(rss_end, 1) << " rss_growth_kib_per_1k_jobs=" << fixed(growth, 1)
      << " keys_end=" << end.keys << " runs_end=" << end.runs << std::endl;
  const bool emptied = end.keys <= fresh.keys && end.runs <= fresh.runs;
  const bool bounded = growth <= kMaxGrowthKibPer1kJobs;
  out << "# target: keys and runs back to a fresh daemon's (" << fresh.keys << ", " << fresh.runs
      << "): " << (emptied ? "met" : "MISSED") << "\n# target: RSS growth at most "
      << kMaxGrowthKibPer1kJobs << " KiB per 1,000 jobs (over the " << measured
      << " jobs after a warm-up of " << warmup << "): " << (bounded ? "met" : "MISSED")
      << "\n# machine at the end: " << loadAverageText() << std::endl;
  if (const std::string how = daemon.server().stop(); how != "exit 0") {
    throw std::runtime_error("ddprund did not stop cleanly after the soak: " + how);
  }
  return emptied && bounded;
}

}  // namespace ddprun::bench

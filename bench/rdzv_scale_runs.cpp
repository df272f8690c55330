#include "rdzv_scale_runs.hpp"

#include <algorithm>
#include <functional>
#include <iostream>
#include <stdexcept>

#include "agent_swarm.hpp"
#include "child_runs.hpp"
#include "ddprun/launcher/core/rdzv_conf.hpp"
#include "ddprun/test_support/fd_limit.hpp"
#include "ddprun/test_support/temp_dir.hpp"
#include "elapsed.hpp"
#include "format.hpp"
#include "machine.hpp"
#include "rdzv_scale_report.hpp"
#include "servers.hpp"

namespace ddprun::bench {
namespace {

using Verb = proto::rendezvous::Verb;
using Millis = std::chrono::milliseconds;

constexpr std::chrono::milliseconds kStopGrace(5000);
// Descriptors this process needs beside two per agent (stdio, epoll, the
// daemon's pipes, a few files).
constexpr std::uint64_t kSpareFds = 32;
// Connections per source address: under the ~28k ephemeral ports of Linux's
// default range, with room for sockets of earlier runs in TIME_WAIT.
constexpr int kConnectionsPerSource = 16384;

Millis millisOf(double seconds) { return Millis(static_cast<long long>(seconds * 1000.0)); }

// The options with ddprun's keep-alive defaults where none was given, and
// the hold one keep-alive interval long unless given.
ScaleOptions withDefaults(ScaleOptions options) {
  const launcher::RdzvConf defaults;
  if (options.keep_alive_interval_s <= 0) {
    options.keep_alive_interval_s =
        std::chrono::duration<double>(defaults.keepAliveInterval()).count();
  }
  if (options.keep_alive_max_attempt <= 0) {
    options.keep_alive_max_attempt = defaults.keepAliveMaxAttempt();
  }
  if (options.hold_s < 0) {
    options.hold_s = options.keep_alive_interval_s;
  }
  return options;
}

SwarmOptions swarmOptions(int agents, const ScaleOptions& options, RunningServer& server) {
  SwarmOptions swarm;
  swarm.port = server.port();
  swarm.agents = agents;
  swarm.local_world_size = options.local_world_size;
  // N-1 may go on without one: the recovery round forms with the survivors.
  swarm.min_nodes = agents - 1;
  swarm.max_nodes = agents;
  swarm.last_call_timeout = millisOf(options.last_call_timeout_s);
  swarm.keep_alive_interval = millisOf(options.keep_alive_interval_s);
  swarm.keep_alive_max_attempt = options.keep_alive_max_attempt;
  swarm.connect_window = options.connect_window;
  swarm.source_addresses = options.source_addresses > 0
                               ? options.source_addresses
                               : 1 + (2 * agents - 1) / kConnectionsPerSource;
  swarm.daemon_ended = [&server] { return server.ended(Millis(500)); };
  return swarm;
}

void check(const std::optional<std::string>& problem) {
  if (problem) {
    throw std::runtime_error(*problem);
  }
}

std::vector<std::size_t> allBut(std::size_t count, std::optional<std::size_t> left_out) {
  std::vector<std::size_t> agents;
  for (std::size_t i = 0; i < count; ++i) {
    if (i != left_out) {
      agents.push_back(i);
    }
  }
  return agents;
}

std::size_t agentWithRank(const AgentSwarm& swarm, int rank) {
  const auto& records = swarm.records();
  for (std::size_t i = 0; i < records.size(); ++i) {
    if (records[i].rounds.front().group_rank == rank) {
      return i;
    }
  }
  throw std::runtime_error("no agent holds group rank " + std::to_string(rank));
}

// The phases of one job, in order, each with its own deadline.
class ScaleRun {
 public:
  ScaleRun(SwarmOptions swarm, const ScaleOptions& options, const RunningServer& server)
      : options_(options),
        server_(server),
        agents_(static_cast<std::size_t>(swarm.agents)),
        swarm_(std::move(swarm)) {}

  void connect(ScaleResult& result) {
    const Clock::time_point start = Clock::now();
    swarm_.connectAll(deadline());
    result.connect_s = millisBetween(start, Clock::now()) / 1000.0;
    progress("connecting", start);
  }

  // The first N-1 join, each followed by a PING whose answer says the daemon
  // has placed it; then the last one, whose join completes the round.
  void firstRound(ScaleResult& result) {
    const Clock::time_point start = Clock::now();
    for (std::size_t i = 0; i + 1 < agents_; ++i) {
      swarm_.join(i);
      swarm_.sync(i);
    }
    awaitSyncs("joining", static_cast<int>(agents_) - 1);
    result.joins_s = millisBetween(start, Clock::now()) / 1000.0;
    // Who spent the CPU in the round: on 2 shared CPUs the agents may be
    // what the figure waits for.
    const double daemon0 = server_.cpuSeconds();
    const double tool0 = processCpuSeconds();
    const Clock::time_point joined = swarm_.join(agents_ - 1);
    awaitHolders("round 0", 1, agents_);
    result.join_to_round_ms = millisBetween(joined, swarm_.lastHeld(1));
    result.round_daemon_cpu_ms = (server_.cpuSeconds() - daemon0) * 1000.0;
    result.round_tool_cpu_ms = (processCpuSeconds() - tool0) * 1000.0;
    check(
        checkRound(swarm_.records(), allBut(agents_, std::nullopt), 0, options_.local_world_size));
    // Every agent measures its clock once its join is taken: let those
    // queries end before the next phase is timed.
    phase(
        "clock queries", [&] { return swarm_.clockDone() == static_cast<int>(agents_); },
        [&] { return std::to_string(swarm_.clockDone()) + " agents done"; });
  }

  // The job runs: every agent heartbeats for --hold seconds, and what each
  // heartbeat costs the daemon is measured.
  void hold(ScaleResult& result) {
    const double cpu0 = server_.cpuSeconds();
    const int beats0 = swarm_.heartbeats();
    const Clock::time_point end = Clock::now() + millisOf(options_.hold_s);
    phase(
        "holding", [&] { return Clock::now() >= end; }, [] { return std::string(); },
        end - Clock::now());
    const int beats = swarm_.heartbeats() - beats0;
    result.hold_beats = beats;
    const double cpu = server_.cpuSeconds() - cpu0;
    // /proc counts CPU in ticks of 10 ms: fewer than ten say little.
    if (beats > 0 && cpu >= 0.1) {
      result.daemon_us_per_beat = cpu * 1e6 / beats;
    }
  }

  // One member dies (both its connections close, as when its machine is
  // gone); the survivors are pushed a new round through its node 0.
  void recovery(ScaleResult& result) {
    result.victim_rank = options_.victim_rank.value_or(static_cast<int>(agents_ / 2));
    victim_ = agentWithRank(swarm_, result.victim_rank);
    const Clock::time_point killed = swarm_.kill(*victim_);
    awaitHolders("recovery", 2, agents_ - 1);
    result.recovery_ms = millisBetween(killed, swarm_.lastHeld(2));
    check(checkRound(swarm_.records(), allBut(agents_, victim_), 1, options_.local_world_size));
  }

  // The exit barrier: every survivor reports done (the last one timed),
  // each is told finished and closes the job, as the real agent does, and
  // all are told closed.
  void exitBarrier(ScaleResult& result) {
    const std::vector<std::size_t> survivors = allBut(agents_, victim_);
    const int synced = swarm_.syncs();
    const Clock::time_point start = Clock::now();
    for (std::size_t i = 0; i + 1 < survivors.size(); ++i) {
      swarm_.send(survivors[i], Verb::kDone);
      swarm_.sync(survivors[i]);
    }
    awaitSyncs("reporting done", synced + static_cast<int>(survivors.size()) - 1);
    result.dones_s = millisBetween(start, Clock::now()) / 1000.0;
    const Clock::time_point last_done = swarm_.send(survivors.back(), Verb::kDone);
    const int expected = static_cast<int>(survivors.size());
    phase(
        "exit barrier", [&] { return swarm_.finished() == expected; },
        [&] {
          return std::to_string(swarm_.finished()) + " of " + std::to_string(expected) +
                 " agents told finished";
        });
    result.done_to_finished_ms = millisBetween(last_done, swarm_.lastFinished());
    phase(
        "closing", [&] { return swarm_.closed() == expected; },
        [&] {
          return std::to_string(swarm_.closed()) + " of " + std::to_string(expected) +
                 " agents told closed";
        });
    // Nothing more came: still exactly one event for each round.
    check(checkRound(swarm_.records(), survivors, 1, options_.local_world_size));
    result.heartbeats = swarm_.heartbeats();
  }

 private:
  Clock::time_point deadline() const { return Clock::now() + millisOf(options_.phase_timeout_s); }

  // Serves the agents until `done()`, within --phase-timeout (after `extra`,
  // for a phase that lasts that long by design), and says how long it took.
  void phase(const std::string& name, const std::function<bool()>& done,
             const std::function<std::string()>& where, Clock::duration extra = {}) {
    const Clock::time_point start = Clock::now();
    swarm_.runUntil(name, done, where, deadline() + extra);
    progress(name, start);
  }

  static void progress(const std::string& name, Clock::time_point start) {
    std::cerr << "rdzv_scale:   " << name << ": "
              << formatNumber("%.3f s", millisBetween(start, Clock::now()) / 1000.0) << '\n';
  }

  void awaitSyncs(const std::string& name, int target) {
    phase(
        name, [&] { return swarm_.syncs() >= target; },
        [&] {
          return std::to_string(swarm_.syncs()) + " of " + std::to_string(target) +
                 " requests acted on";
        });
  }

  void awaitHolders(const std::string& name, std::size_t rounds, std::size_t holders) {
    phase(
        name, [&] { return swarm_.holding(rounds) == static_cast<int>(holders); },
        [&] {
          return std::to_string(swarm_.holding(rounds)) + " of " + std::to_string(holders) +
                 " agents hold it";
        });
  }

  const ScaleOptions& options_;
  const RunningServer& server_;
  std::size_t agents_;
  AgentSwarm swarm_;
  std::optional<std::size_t> victim_;
};

// Two descriptors per agent here, and about as many in ddprund, which
// inherits this process's limit.
std::uint64_t descriptorsFor(int agents) {
  return 2 * static_cast<std::uint64_t>(agents) + kSpareFds;
}

void checkFdLimit(int agents) {
  const std::uint64_t limit = test_support::raiseFdLimit().soft;
  if (limit < descriptorsFor(agents)) {
    throw std::runtime_error(
        std::to_string(agents) + " agents need " + std::to_string(descriptorsFor(agents)) +
        " file descriptors here and about as many in ddprund, and the limit is " +
        std::to_string(limit) +
        " (the hard limit; raising it needs root with CAP_SYS_RESOURCE): raise ulimit -Hn, or "
        "run fewer agents");
  }
}

// The most agents a descriptor limit of `limit` holds (at least 2).
int agentsHeldBy(std::uint64_t limit) {
  return static_cast<int>(std::max<std::uint64_t>(2, (limit - std::min(limit, kSpareFds)) / 2));
}

}  // namespace

ScaleResult runScale(int agents, const ScaleOptions& given) {
  const ScaleOptions options = withDefaults(given);
  checkFdLimit(agents);
  test_support::TempDir scratch("rdzv_scale");
  ServerConfig config;
  config.ddprund = options.ddprund;
  config.ddprund_threads = options.ddprund_threads;
  RunningServer server(ServerKind::Ddprund, config, scratch);
  const double machine0 = machineBusySeconds();
  const double self0 = processCpuSeconds();
  const Clock::time_point start = Clock::now();

  ScaleResult result;
  result.agents = agents;
  result.asked = agents;
  {
    SwarmOptions swarm = swarmOptions(agents, options, server);
    result.source_addresses = swarm.source_addresses;
    ScaleRun run(std::move(swarm), options, server);
    run.connect(result);
    run.firstRound(result);
    run.hold(result);
    run.recovery(result);
    run.exitBarrier(result);
  }  // every connection closes here, as the agents exit

  result.daemon_cpu_s = server.cpuSeconds();
  result.daemon_rss_mib = static_cast<double>(peakRssKib(server.pid()).value_or(0)) / 1024.0;
  result.tool_cpu_s = processCpuSeconds() - self0;
  const double wall = millisBetween(start, Clock::now()) / 1000.0;
  const double others = machineBusySeconds() - machine0 - result.tool_cpu_s - result.daemon_cpu_s;
  result.other_cores = wall > 0 ? std::max(0.0, others / wall) : 0.0;
  if (const std::string how = server.stop(); how != "exit 0") {
    throw std::runtime_error("ddprund did not stop cleanly after the run: " + how);
  }
  return result;
}

void runRdzvScale(const ScaleOptions& given, std::ostream& out) {
  const ScaleOptions options = withDefaults(given);
  const std::string machine_before = machineText();
  // Before any ddprund starts: each inherits the raised limit.
  const std::uint64_t limit = test_support::raiseFdLimit().soft;
  std::vector<ScaleResult> results;
  for (const int asked : options.agents) {
    const int agents = std::min(asked, agentsHeldBy(limit));
    if (agents < asked) {
      std::cerr << "rdzv_scale: " << asked << " agents need " << descriptorsFor(asked)
                << " file descriptors in this process and about as many in ddprund; the limit "
                << "is " << limit << " (raising the hard limit needs CAP_SYS_RESOURCE), so "
                << agents << " agents, the most it holds, run instead\n";
    }
    std::cerr << "rdzv_scale: " << agents << " agents...\n";
    results.push_back(runScale(agents, options));
    results.back().asked = asked;
    results.back().fd_limit = agents < asked ? limit : 0;
    printResultLine(out, results.back());
    out.flush();
  }
  printScaleReport(out, results, options, machine_before);
}

}  // namespace ddprun::bench

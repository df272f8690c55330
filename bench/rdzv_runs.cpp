// rdzv_bench's runs: one ElasticJob per launcher, agent count and run, its
// workers' stamps turned into the report's figures (see rdzv_bench.cpp).
#include "rdzv_runs.hpp"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "child_runs.hpp"
#include "ddprun/test_support/fd_limit.hpp"
#include "etcd_requests.hpp"
#include "format.hpp"
#include "launch_report.hpp"
#include "machine.hpp"
#include "python_workers.hpp"

namespace ddprun::bench {

namespace {

namespace fs = std::filesystem;
using Clock = ElasticJob::Clock;

// A torchrun agent's resident memory is about 235 MiB (Python and torch);
// rounded up, and at most this share of what the machine has available.
constexpr double kTorchrunAgentMiB = 250.0;
constexpr double kTorchrunMemoryShare = 0.6;
// Rounds of etcd's requests timed alone (etcd_requests.hpp): about 4 ms each.
constexpr int kEtcdRequestSamples = 50;

// Empty if torchrun runs with `agents` agents; else why not, for the table.
// Memory first: it says more than the flag when both apply.
std::string torchrunSkipped(const RdzvBench& bench, int agents, int max_agents, const char* flag) {
  if (bench.programs.python.empty()) {
    return bench.options.skip_torchrun ? "not run (--skip-torchrun)" : "not run (no torch)";
  }
  const double need = agents * kTorchrunAgentMiB;
  const double available = memAvailableMiB();
  if (need > kTorchrunMemoryShare * available) {
    return "not run: " + std::to_string(agents) + " × 250 MiB > 60% of MemAvailable (" +
           formatNumber("%.1f", available / 1024.0) + " GiB)";
  }
  if (agents > max_agents) {
    return "not run (" + std::string(flag) + " " + std::to_string(max_agents) + ")";
  }
  return "";
}

std::pair<fs::path, std::string> freshRun(RdzvBench& bench, const std::string& figure,
                                          Launcher launcher, int agents, int run) {
  const std::string label = figure + "." + nameOf(launcher) + ".N" + std::to_string(agents) + "." +
                            std::to_string(++bench.counter);
  const fs::path dir = bench.scratch.path() / label;
  fs::create_directory(dir);
  const std::string name = figure + ", " + nameOf(launcher) + ", " + std::to_string(agents) +
                           " agents, " +
                           (run < 0 ? "warm-up run" : "run " + std::to_string(run + 1));
  return {dir, name};
}

Clock::time_point deadlineIn(double seconds) {
  return Clock::now() + std::chrono::milliseconds(static_cast<long>(seconds * 1000));
}

// When the first and the last of a round's workers started, after `from`.
struct Timing {
  double first_ms = 0.0;
  double last_ms = 0.0;
};

Timing timingAfter(const std::vector<WorkerStamp>& stamps, Clock::time_point from) {
  const auto [first, last] =
      std::minmax_element(stamps.begin(), stamps.end(),
                          [](const auto& a, const auto& b) { return a.entered_ns < b.entered_ns; });
  const auto from_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(from.time_since_epoch()).count();
  return {static_cast<double>(first->entered_ns - from_ns) / 1e6,
          static_cast<double>(last->entered_ns - from_ns) / 1e6};
}

// A note when the workers saw another world than the round they belong to.
void checkWorld(RdzvBench& bench, const std::string& name, const std::vector<WorkerStamp>& stamps,
                int restart_count, int world_size) {
  for (const auto& stamp : stamps) {
    if (stamp.restart_count != restart_count || stamp.world_size != world_size) {
      bench.report.notes.push_back(
          name +
          ": a worker saw TORCHELASTIC_RESTART_COUNT=" + std::to_string(stamp.restart_count) +
          ", WORLD_SIZE=" + std::to_string(stamp.world_size) + " (expected " +
          std::to_string(restart_count) + " and " + std::to_string(world_size) + ")");
      return;
    }
  }
}

Timing rendezvousRun(RdzvBench& bench, Launcher launcher, int agents, int run) {
  const auto [dir, name] = freshRun(bench, "rendezvous", launcher, agents, run);
  ElasticJob job(bench.programs, {launcher, agents, agents, 0, dir, name},
                 deadlineIn(bench.options.timeout_s));
  for (int index = 0; index + 1 < agents; ++index) {
    job.startAgent();
  }
  job.waitJoined(agents - 1);
  const Clock::time_point last_started = job.startAgent();
  const auto stamps = job.waitStamps(0, agents);
  job.waitSuccess();
  checkWorld(bench, name, stamps, 0, agents);
  return timingAfter(stamps, last_started);
}

// Empty: torchrun's survivors did not restart by the deadline.
std::optional<Timing> recoveryRun(RdzvBench& bench, Launcher launcher, int agents, int run) {
  const auto [dir, name] = freshRun(bench, "recovery", launcher, agents, run);
  const bool ddprun = launcher != Launcher::Torchrun;
  const double recovery_s =
      ddprun ? bench.options.timeout_s : bench.options.torchrun_recovery_timeout_s;
  const int hold_s = static_cast<int>(std::ceil(bench.options.timeout_s + recovery_s));
  ElasticJob job(bench.programs, {launcher, 1, agents, hold_s, dir, name},
                 deadlineIn(bench.options.timeout_s + recovery_s));
  for (int index = 0; index < agents; ++index) {
    job.startAgent();
  }
  // All N joined: round 0 completes at max_nodes, with no last call.
  job.waitStamps(0, agents);
  // The last agent: never agent 0, which hosts torchrun's store.
  const Clock::time_point killed = job.killAgent(agents - 1);
  const auto stamps = job.waitStampsUntil(1, agents - 1, deadlineIn(recovery_s));
  if (!stamps) {
    if (ddprun) {
      job.fail("the survivors did not restart within the timeout",
               launcher == Launcher::Ddprun ? dir / "ddprund.log" : job.agentLog(0));
    }
    return std::nullopt;
  }
  const Timing timing = timingAfter(*stamps, killed);
  job.waitSuccess();
  // torchrun counts only failures in TORCHELASTIC_RESTART_COUNT; ddprun's is the round.
  checkWorld(bench, name, *stamps, ddprun ? 1 : 0, agents - 1);
  return timing;
}

void record(RdzvRow& row, Launcher launcher, const Timing& timing) {
  row.of(launcher).last.add(timing.last_ms);
  row.of(launcher).first.add(timing.first_ms);
}

std::string describe(const Timing& timing) {
  return formatNumber("%.1f ms", timing.last_ms) +
         formatNumber(" (first worker: %.1f ms)", timing.first_ms);
}

void progress(const std::string& what, Launcher launcher, int agents, int run,
              const std::string& result) {
  std::cerr << "rdzv_bench: " << what << ", " << nameOf(launcher) << ", " << agents << " agents, "
            << (run < 0 ? std::string("warm-up") : "run " + std::to_string(run + 1)) << ": "
            << result << std::endl;
}

void findPrograms(RdzvBench& setup) {
  setup.programs.base_env = launcherBaseEnvironment();
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
  const auto torch = findTorchPython(setup.options.python, setup.scratch.path());
  if (!torch.torch_version.empty()) {
    setup.programs.python = torch.python;
    setup.torch_version = torch.torch_version;
  }
}

// One 3-member cluster for the whole benchmark: starting one takes seconds,
// and each run's own run id keeps its keys apart from the others'.
void startEtcd(RdzvBench& setup) {
  if (setup.options.skip_etcd) {
    setup.etcd_skipped = "not run (--skip-etcd)";
    return;
  }
  if (test_support::EtcdCluster::binary().empty()) {
    setup.etcd_skipped = "not run (no etcd binary)";
    setup.report.notes.push_back("no etcd on PATH (nor $DDPRUN_ETCD): ddprun-etcd not measured");
    return;
  }
  setup.etcd = std::make_unique<test_support::EtcdCluster>();
  setup.programs.etcd_endpoints = setup.etcd->endpoints();
  setup.report.etcd_lease_ttl_s = kEtcdLeaseTtlS;
}

std::string describeSetup(const RdzvBench& setup, const std::string& load_before) {
  const RdzvOptions& o = setup.options;
  std::ostringstream out;
  out << "Loopback, one worker per agent (restart_worker: it stamps CLOCK_MONOTONIC at entry). "
      << o.runs << " timed run(s) per launcher and agent count, alternating the launchers "
      << "(rendezvous: after one untimed warm-up run each). ddprun: `ddprun --nnodes N "
         "--rdzv-backend c10d --rdzv-conf is_host=0` against one `ddprund --port 0` per run ("
      << o.ddprun
      << "). ddprun-etcd: `ddprun --nnodes N --rdzv-backend etcd-v3 --rdzv-endpoint "
         "<3 members> --rdzv-conf keep_alive_interval="
      << kEtcdKeepAliveIntervalS << ",keep_alive_max_attempt=" << kEtcdKeepAliveMaxAttempt
      << "` (lease TTL " << kEtcdLeaseTtlS
      << " s: a SIGKILLed agent is lost when its lease expires) against one 3-member etcd cluster "
         "on loopback (heartbeat 50 ms, election timeout 500 ms), started once for the whole "
         "benchmark, each run with its own run id"
      << (setup.etcd ? std::string() : " (" + setup.etcd_skipped + ")") << ". torchrun: `"
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
      << formatNumber("%.0f s", o.torchrun_recovery_timeout_s) << " to restart its survivors. "
      << std::thread::hardware_concurrency() << " CPUs, MemAvailable "
      << formatNumber("%.1f GiB", memAvailableMiB() / 1024.0) << ". Before: " << load_before
      << "; after: " << loadAverageText() << ".";
  return out.str();
}

}  // namespace

void measureRendezvous(RdzvBench& bench) {
  bool warmed = false;
  for (const int agents : bench.options.agents) {
    RdzvRow row;
    row.agents = agents;
    row.torchrun.note =
        torchrunSkipped(bench, agents, bench.options.torchrun_max_agents, "--torchrun-max-agents");
    row.etcd.note = bench.etcd_skipped;
    std::vector<Launcher> launchers{Launcher::Ddprun};
    if (bench.etcd) {
      launchers.push_back(Launcher::DdprunEtcd);
    }
    if (row.torchrun.note.empty()) {
      launchers.push_back(Launcher::Torchrun);
    }
    const OtherCpu other;
    // One untimed run of each launcher first, so neither pays for a cold page cache.
    for (int run = warmed ? 0 : -1; run < bench.options.runs; ++run) {
      for (const Launcher launcher : launchers) {
        const Timing timing = rendezvousRun(bench, launcher, agents, run);
        progress("rendezvous", launcher, agents, run, describe(timing));
        if (run >= 0) {
          record(row, launcher, timing);
        }
      }
    }
    warmed = true;
    row.other_cores = other.cores();
    bench.report.rendezvous.push_back(std::move(row));
  }
}

void measureRecovery(RdzvBench& bench) {
  for (const int agents : bench.options.recovery_agents) {
    RdzvRow row;
    row.agents = agents;
    row.torchrun.note = torchrunSkipped(bench, agents, bench.options.torchrun_recovery_max_agents,
                                        "--torchrun-recovery-max-agents");
    row.etcd.note = bench.etcd_skipped;
    bool torchrun_runs = row.torchrun.note.empty();
    const OtherCpu other;
    for (int run = 0; run < bench.options.runs; ++run) {
      const Timing timing = *recoveryRun(bench, Launcher::Ddprun, agents, run);
      progress("recovery", Launcher::Ddprun, agents, run, describe(timing));
      record(row, Launcher::Ddprun, timing);
      if (bench.etcd) {
        const Timing etcd = *recoveryRun(bench, Launcher::DdprunEtcd, agents, run);
        progress("recovery", Launcher::DdprunEtcd, agents, run, describe(etcd));
        record(row, Launcher::DdprunEtcd, etcd);
      }
      if (!torchrun_runs) {
        continue;
      }
      if (const auto torchrun = recoveryRun(bench, Launcher::Torchrun, agents, run)) {
        progress("recovery", Launcher::Torchrun, agents, run, describe(*torchrun));
        record(row, Launcher::Torchrun, *torchrun);
        continue;
      }
      // Nothing tells its survivors, run after run: another wait would say the same.
      const std::string limit = formatNumber("%.0f s", bench.options.torchrun_recovery_timeout_s);
      progress("recovery", Launcher::Torchrun, agents, run, "no recovery within " + limit);
      row.torchrun.last.addFailure();
      const int skipped = bench.options.runs - run - 1;
      row.torchrun.note =
          "no recovery within " + limit +
          (skipped > 0 ? "; the " + std::to_string(skipped) + " later run(s) not tried" : "");
      torchrun_runs = false;
    }
    row.other_cores = other.cores();
    bench.report.recovery.push_back(std::move(row));
  }
}

void runRdzvBench(const RdzvOptions& options, std::ostream& out) {
  const std::string load_before = loadAverageText();
  test_support::raiseFdLimit();  // inherited: ddprund holds three connections per agent
  RdzvBench setup;
  setup.options = options;
  findPrograms(setup);
  if (!options.skip_torchrun && setup.programs.python.empty()) {
    setup.report.notes.push_back("no interpreter here can import torch: torchrun not measured");
  }
  startEtcd(setup);
  measureRendezvous(setup);
  if (setup.etcd) {
    setup.report.etcd_requests = timeEtcdRequests(setup.etcd->endpoints(), kEtcdRequestSamples);
  }
  measureRecovery(setup);
  setup.report.setup = describeSetup(setup, load_before);
  printRdzvReport(out, setup.report);
}

}  // namespace ddprun::bench

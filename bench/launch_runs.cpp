// launch_bench's runs: each launcher started per variant, timed to its exit,
// and its workers' stamps and the agent's memory (VmHWM, PSS) read back (see
// launch_runs.hpp for what is compared and how).
#include "launch_runs.hpp"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "child_runs.hpp"
#include "ddprun/launcher/process/executable_path.hpp"
#include "ddprun/test_support/temp_dir.hpp"
#include "launch_one_run.hpp"
#include "launch_report.hpp"
#include "machine.hpp"
#include "python_workers.hpp"
#include "restart_phases.hpp"
#include "run_files.hpp"

namespace ddprun::bench {
namespace {

namespace fs = std::filesystem;
using launch::alternate;
using launch::During;
using launch::Launcher;
using launch::launchers;
using launch::runOnce;
using launch::RunResult;
using launch::samplesOf;
using launch::Setup;
using launch::Workers;

// An executable on this process's PATH, or an empty path.
std::filesystem::path onPath(const std::string& name) {
  const char* path = std::getenv("PATH");
  return ddprun::launcher::findExecutable(name, path != nullptr ? path : "").value_or("");
}

// Targets (issue 30): a launch within these multiples of the floor, restarts
// within these times.
constexpr double kPythonLaunchFloors = 1.2;
constexpr double kProgramLaunchFloors = 2.0;
constexpr double kPythonRestartMs = 50.0;
constexpr double kProgramRestartMs = 10.0;

Comparison measureLaunch(Setup& setup, const Workers& workers) {
  std::cerr << "launch_bench: launch, " << workers.label << "..." << std::endl;
  Comparison row{workers.label, {}, {}, 0.0, {}, 0.0};
  row.floor_target = workers.python ? kPythonLaunchFloors : kProgramLaunchFloors;
  const OtherCpu other;
  // torchrun has no probe: its row would repeat the one with PYTHON_EXEC.
  const auto order = workers.interpreter != Workers::Interpreter::kGiven
                         ? std::vector<Launcher>{Launcher::Ddprun, Launcher::Floor}
                         : launchers(setup, true);
  alternate(
      order, setup.options.runs,
      [&row](Launcher launcher, int, const RunResult& result) {
        auto& samples = samplesOf(row, launcher);
        result.ok ? samples.add(result.ms) : samples.addFailure();
      },
      [&](Launcher launcher, int) { return runOnce(setup, launcher, workers, 0, "launch"); });
  row.other_cores = other.cores();
  return row;
}

// ddprun's phases of one restart into the row, if its timeline has them all.
void recordPhases(RestartComparison& row, const fs::path& dir, const RestartStamps& stamps) {
  const auto times = readRestartTimes(dir, stamps);
  if (!times) {
    return;
  }
  for (std::size_t phase = 0; phase < kRestartPhaseCount; ++phase) {
    row.since_crash[phase].add((*times)[phase]);
    const int start = restartPhaseStart(static_cast<RestartPhase>(phase));
    row.phase_took[phase].add((*times)[phase] - (start < 0 ? 0.0 : (*times)[start]));
  }
}

// The restart's floor: the shell started the replacement workers alone, and
// the last of them entered main this long after.
void recordRestartFloor(RestartComparison& row, const RunResult& result, int nproc) {
  const auto last = result.ok ? lastStartNs(result.dir, nproc) : std::nullopt;
  if (!last) {
    row.all_started.floor.addFailure();
    return;
  }
  const auto started_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(result.started.time_since_epoch());
  row.all_started.floor.add(static_cast<double>(*last - started_ns.count()) / 1e6);
}

// One restart run's figures into the row; false if a stamp is missing.
bool recordRestart(RestartComparison& row, Launcher launcher, const fs::path& dir, int nproc) {
  const auto stamps = readRestartStamps(dir, nproc);
  if (!stamps) {
    return false;
  }
  if (launcher == Launcher::Ddprun) {
    recordPhases(row, dir, *stamps);
  }
  samplesOf(row.all_started, launcher).add(stamps->last_start_ms);
  samplesOf(row.first_started, launcher).add(stamps->first_start_ms);
  if (stamps->first_term_ms) {
    samplesOf(row.survivors_told, launcher).add(*stamps->first_term_ms);
  }
  return true;
}

// When rank 0 crashes, after every rank is up: uniform over two of torchrun's
// 0.1 s monitor intervals, so its polling is met at every phase instead of
// always just after it started. Both launchers get the same moment in each
// pair of runs; ddprun, event-driven, does not care.
std::vector<std::string> crashDelays(int count) {
  std::mt19937 random(20240601);  // fixed: the same moments in every benchmark run
  std::uniform_int_distribution<int> delay_us(0, 199'999);
  std::vector<std::string> delays;
  delays.reserve(static_cast<std::size_t>(count));
  for (int i = 0; i < count; ++i) {
    delays.push_back(std::to_string(delay_us(random)));
  }
  return delays;
}

RestartComparison measureRestart(Setup& setup, const Workers& workers) {
  std::cerr << "launch_bench: restart, " << workers.label << "..." << std::endl;
  RestartComparison row;
  row.label = row.all_started.label = workers.label;
  row.target_ms = workers.python ? kPythonRestartMs : kProgramRestartMs;
  const auto delays_us = crashDelays(setup.options.runs + 1);
  const OtherCpu other;
  alternate(
      launchers(setup, true), setup.options.runs,
      [&](Launcher launcher, int, const RunResult& result) {
        if (launcher == Launcher::Floor) {
          recordRestartFloor(row, result, setup.options.nproc);
          return;
        }
        if (!result.ok || !recordRestart(row, launcher, result.dir, setup.options.nproc)) {
          samplesOf(row.all_started, launcher).addFailure();
          if (result.ok) {
            setup.report.notes.push_back(std::string(nameOf(launcher)) + ", restart, " +
                                         workers.label + ": a worker stamp is missing");
          }
        }
      },
      [&](Launcher launcher, int run) {
        if (launcher == Launcher::Floor) {  // the replacements alone
          return runOnce(setup, launcher, workers, 1, "restart",
                         {{"TORCHELASTIC_RESTART_COUNT", "1"},
                          {"WORLD_SIZE", std::to_string(setup.options.nproc)}});
        }
        const std::pair<std::string, std::string> delay{"LAUNCH_BENCH_CRASH_DELAY_US",
                                                        delays_us[run + 1]};
        return runOnce(setup, launcher, workers, 1, "restart", {delay});
      });
  row.all_started.other_cores = other.cores();
  return row;
}

// The largest of a run's samples, or the run's failure.
void recordPeak(Comparison& row, Launcher launcher, const RunResult& result, double peak_kib) {
  if (result.ok && peak_kib > 0) {
    samplesOf(row, launcher).add(peak_kib);
  } else {
    samplesOf(row, launcher).addFailure();
  }
}

// The agent's memory, sampled every millisecond from the moment every worker
// is up until the launcher exits: its VmHWM, and at the same moments its PSS
// (for ddprun the guardian's and the agent's added), keeping the largest sum.
// The workers wait for `release`, created after the first sample, so the
// agent is seen with its whole group running.
void measureMemory(Setup& setup) {
  std::cerr << "launch_bench: agent peak RSS and PSS..." << std::endl;
  const Workers hold{"hold", false, {setup.restart_worker.string(), "hold"}};
  Comparison rss{"peak RSS", {}, {}, 0.0, {}, 0.0};
  Comparison pss{"peak PSS", {}, {}, 0.0, {}, 0.0};
  const OtherCpu other;
  double rss_kib = 0.0;
  double pss_kib = 0.0;
  const During sample_until_exit = [&](launcher::Subprocess& process, const fs::path& dir,
                                       Clock::time_point deadline) {
    std::vector<fs::path> up;
    up.reserve(static_cast<std::size_t>(setup.options.nproc));
    for (int rank = 0; rank < setup.options.nproc; ++rank) {
      up.push_back(dir / ("up." + std::to_string(rank)));
    }
    if (!waitForFiles(up, process, deadline)) {
      return false;
    }
    auto sample = [&] {
      if (auto kib = launcherPeakRssKib(process.pid())) {
        rss_kib = std::max(rss_kib, static_cast<double>(*kib));
      }
      if (auto kib = launcherPssKib(process.pid())) {
        pss_kib = std::max(pss_kib, static_cast<double>(*kib));
      }
    };
    sample();
    std::ofstream(dir / "release").put('\n');
    return waitExit(process, deadline, std::chrono::milliseconds(1), sample).has_value();
  };
  alternate(
      launchers(setup, false), std::min(setup.options.runs, 3),
      [&](Launcher launcher, int, const RunResult& result) {
        recordPeak(rss, launcher, result, rss_kib);
        recordPeak(pss, launcher, result, pss_kib);
      },
      [&](Launcher launcher, int) {
        rss_kib = pss_kib = 0.0;
        return runOnce(setup, launcher, hold, 0, "rss", {}, sample_until_exit);
      });
  rss.other_cores = pss.other_cores = other.cores();
  setup.report.peak_rss = std::move(rss);
  setup.report.peak_pss = std::move(pss);
}

void findPrograms(Setup& setup) {
  setup.restart_worker = selfDirectory() / "restart_worker";
  setup.true_program = onPath("true");
  setup.shell = onPath("sh");
  if (setup.true_program.empty() || setup.shell.empty() || !fs::exists(setup.restart_worker)) {
    throw std::runtime_error(
        "needs `true` and `sh` on PATH and restart_worker next to launch_bench");
  }
  const auto torch = findTorchPython(setup.options.python, setup.scratch.path());
  setup.python = torch.python;
  setup.torch_version = torch.torch_version;
  if (setup.python.empty()) {
    setup.python = onPath("python3").string();
  }
  if (setup.torch_version.empty() && !setup.options.skip_torchrun) {
    setup.report.notes.push_back("no interpreter here can import torch: torchrun not measured");
  }
}

std::string describeSetup(const Setup& setup, const std::string& load_before) {
  std::ostringstream out;
  out << setup.options.nproc << " workers per launch; " << setup.options.runs
      << " timed runs per launcher and variant after one untimed warm-up run each, alternating "
         "the launchers. ddprun: `ddprun --standalone` ("
      << setup.options.ddprun << "). torchrun: `" << setup.python
      << " -m torch.distributed.run --standalone --monitor_interval 0.1 -r 9:1 -t 9:1` (torch "
      << (setup.torch_version.empty() ? "not found" : setup.torch_version)
      << "). Python workers run as `" << setup.python
      << " -u script` under both (PYTHON_EXEC for ddprun). Floor: `sh` starting the same "
      << setup.options.nproc
      << " workers in parallel and waiting for them (`sh -c 'W & W & … wait'`). Restart: "
         "--max-restarts 1; rank 0 "
         "crashes 0–200 ms (random, the same for both launchers) after every rank is up; the "
         "others die at once of the launcher's SIGTERM. "
      << std::thread::hardware_concurrency() << " CPUs. Before: " << load_before
      << "; after: " << loadAverageText() << ".";
  return out.str();
}

}  // namespace

void runLaunchBench(const LaunchOptions& options, std::ostream& out) {
  const std::string load_before = loadAverageText();
  Setup setup;
  setup.options = options;
  setup.base_env = launcherBaseEnvironment();
  findPrograms(setup);
  const auto scripts = writeWorkerScripts(setup.scratch.path());
  const std::string n = std::to_string(options.nproc);

  const Workers python_noop{n + " × `import sys` (Python)", true, {scripts.noop.string()}};
  using enum Workers::Interpreter;
  const Workers python_probed{
      n + " × `import sys` (Python), no PYTHON_EXEC: the probe's kept answer",
      true,
      {scripts.noop.string()},
      kProbed};
  const Workers python_asked{n + " × `import sys` (Python), no PYTHON_EXEC: the probe every launch",
                             true,
                             {scripts.noop.string()},
                             kProbedEachLaunch};
  const Workers true_noop{n + " × `true` (--no-python)", false, {setup.true_program.string()}};
  const Workers cpp_restart{n + " × restart_worker (C++, --no-python)",
                            false,
                            {setup.restart_worker.string(), "restart"}};
  const Workers python_restart{n + " × Python script", true, {scripts.restart.string()}};
  if (!setup.python.empty()) {
    setup.report.launch.push_back(measureLaunch(setup, python_noop));
    setup.report.launch.push_back(measureLaunch(setup, python_probed));
    setup.report.launch.push_back(measureLaunch(setup, python_asked));
  }
  setup.report.launch.push_back(measureLaunch(setup, true_noop));
  setup.report.restart.push_back(measureRestart(setup, cpp_restart));
  if (!setup.python.empty()) {
    setup.report.restart.push_back(measureRestart(setup, python_restart));
  }
  measureMemory(setup);
  setup.report.setup = describeSetup(setup, load_before);
  printLaunchReport(out, setup.report);
}

}  // namespace ddprun::bench

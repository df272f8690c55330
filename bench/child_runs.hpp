// The benchmarks' children (launchers, daemons, servers), each a
// launcher::Subprocess: its own process group, killed with the benchmark.
// What a benchmark needs around one lives here as free functions: a log for
// its output, the moments it started and exited, its status in the report's
// words, and waits for the files it writes. Called from the benchmark's main
// thread.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ddprun/launcher/process/subprocess.hpp"

namespace ddprun::bench {

using Clock = std::chrono::steady_clock;
using EnvVars = std::vector<std::pair<std::string, std::string>>;

struct LaunchSpec {
  std::vector<std::string> argv;  // argv[0] is the program path
  EnvVars env;                    // the whole environment
  std::filesystem::path log;      // stdout and stderr go here
};

// A child just started, and the moment taken just before its fork: what
// launch and rendezvous times are measured from.
struct StartedChild {
  launcher::Subprocess process;
  Clock::time_point started;
};

// Starts `spec`; throws launcher::SpawnError if it cannot run.
StartedChild startLogged(const LaunchSpec& spec);

// Waits until `child` exits or `deadline` passes, calling `sample` every
// `period` while it runs. The moment its exit was seen (now, if it had been
// reaped before), or nullopt at the deadline.
std::optional<Clock::time_point> waitExit(
    launcher::Subprocess& child, Clock::time_point deadline,
    std::chrono::milliseconds period = std::chrono::seconds(1),
    const std::function<void()>& sample = nullptr);

// "exit 0", "signal 9", or "running".
std::string describeStatus(const launcher::Subprocess& child);
bool succeeded(const launcher::Subprocess& child);

// SIGTERM, then SIGKILL after `grace`; says how the child ended, with
// " (did not exit on SIGTERM)" when it took the SIGKILL.
std::string stopAndDescribe(launcher::Subprocess& child, std::chrono::milliseconds grace);

// The peak resident set (VmHWM) of a live process, in KiB; empty once it has
// exited (a zombie has no memory left to report).
std::optional<std::int64_t> peakRssKib(pid_t pid);

// The launcher's peak resident set: peakRssKib() of `pid`, or, for ddprun,
// whose pid stays behind as a guardian of its agent process (a child of the
// same name), the two added (the pages they share counted twice).
std::optional<std::int64_t> launcherPeakRssKib(pid_t pid);

// The launcher's proportional set size now, in KiB: for ddprun its guardian
// and its agent added, each page they share counted once; empty once the
// launcher has exited or its smaps_rollup cannot be read.
std::optional<std::int64_t> launcherPssKib(pid_t pid);

// Waits until every file exists; false if the child exits first or the
// deadline passes.
bool waitForFiles(const std::vector<std::filesystem::path>& files, launcher::Subprocess& child,
                  Clock::time_point deadline);

// This process's environment less what the benchmarks set per run and the
// agents' own settings (PET_*, TORCHELASTIC_*), which must not leak in from
// the caller.
EnvVars launcherBaseEnvironment();

}  // namespace ddprun::bench

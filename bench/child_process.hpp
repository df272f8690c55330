// Child processes for the benchmark's servers, and the deadline helpers that
// keep the benchmark from ever hanging on one of them.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace ddprun::bench {

using Clock = std::chrono::steady_clock;

// A spawned program. The child gets PR_SET_PDEATHSIG, so it dies with the
// benchmark even when the benchmark itself is killed; the destructor asks it
// to stop with SIGTERM and escalates to SIGKILL after a grace period.
class ChildProcess {
 public:
  // argv[0] is the program path. stdout is discarded (both servers print a
  // banner we do not need); stderr is inherited so server errors stay visible.
  explicit ChildProcess(std::vector<std::string> argv);
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  bool running();
  // SIGTERM, then SIGKILL after `grace`. Returns the exit status as a string
  // ("exit 0", "signal 9") for the report.
  std::string stop(std::chrono::milliseconds grace = std::chrono::milliseconds(3000));
  // User + system CPU seconds the child has used so far (from /proc).
  double cpuSeconds() const;

 private:
  pid_t pid_ = -1;
  int status_ = 0;
  bool reaped_ = false;
};

// Polls for a port file written by a child (atomically, by rename), failing
// if the child dies or the deadline passes.
std::uint16_t waitForPortFile(const std::filesystem::path& path, ChildProcess& child,
                              std::chrono::milliseconds timeout);

// A private scratch directory (port files, worker files, launcher logs),
// removed with everything in it on destruction.
class TempDir {
 public:
  explicit TempDir(std::string_view prefix = "store_bench");
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// A last-resort guard: if a phase overruns its deadline, report it, kill every
// live child and exit with status 3, so the benchmark never hangs.
class Watchdog {
 public:
  Watchdog(std::string what, std::chrono::milliseconds timeout);
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// CPU seconds the whole machine has spent busy (all CPUs, from /proc/stat),
// to tell how much of a window other people's processes used.
double machineBusySeconds();

// CPU seconds this process has used (user + system); with include_children,
// also every descendant it (or a launcher under it) has reaped.
double processCpuSeconds(bool include_children = false);

// Raises the soft RLIMIT_NOFILE to the hard limit; returns the new soft limit.
std::uint64_t raiseFdLimit();

// The directory holding the running executable (for sibling programs).
std::filesystem::path selfDirectory();

}  // namespace ddprun::bench

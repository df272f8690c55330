// One launcher run (ddprun or torchrun) as launch_bench sees it: started,
// timed to its exit through a pidfd, its memory read from /proc, and never
// left behind.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace ddprun::bench {

struct LaunchSpec {
  std::vector<std::string> argv;  // argv[0] is the program path
  std::vector<std::string> env;   // NAME=value, the whole environment
  std::filesystem::path log;      // the launcher's stdout and stderr go here
};

// A launcher run. The child leads its own process group and gets
// PR_SET_PDEATHSIG, so it dies with the benchmark; the destructor kills the
// group if it is still running. Both launchers stop their own workers on
// SIGTERM, and every worker launch_bench uses exits or dies with its parent.
class LauncherProcess {
 public:
  using Clock = std::chrono::steady_clock;

  explicit LauncherProcess(const LaunchSpec& spec);
  ~LauncherProcess();
  LauncherProcess(const LauncherProcess&) = delete;
  LauncherProcess& operator=(const LauncherProcess&) = delete;

  pid_t pid() const { return pid_; }
  // Taken just before fork, and when the pidfd turned readable.
  Clock::time_point started() const { return started_; }
  Clock::time_point exited() const { return exited_; }

  // Blocks until the launcher exits or the deadline passes; true if it exited.
  bool waitExit(Clock::time_point deadline);
  // Like waitExit, but calls `sample` every `period` while the launcher runs.
  bool waitExitSampling(Clock::time_point deadline, std::chrono::milliseconds period,
                        const std::function<void()>& sample);
  bool running() const { return !reaped_; }
  // SIGTERM to the launcher, then SIGKILL to its group after `grace`.
  void stop(std::chrono::milliseconds grace);
  // "exit 0", "signal 9", or "running".
  std::string describeStatus() const;
  bool succeeded() const;

 private:
  bool pollExit(int timeout_ms);
  void reap();

  pid_t pid_ = -1;
  int pidfd_ = -1;
  int status_ = 0;
  bool reaped_ = false;
  Clock::time_point started_;
  Clock::time_point exited_;
};

// The peak resident set (VmHWM) of a live process, in KiB; empty once it has
// exited (a zombie has no memory left to report).
std::optional<std::int64_t> peakRssKib(pid_t pid);

// Waits until every file exists; false if the launcher exits first or the
// deadline passes.
bool waitForFiles(const std::vector<std::filesystem::path>& files, LauncherProcess& launcher,
                  LauncherProcess::Clock::time_point deadline);

// The first integer in a file, if it has one.
std::optional<std::int64_t> readNumber(const std::filesystem::path& path);

// A restart run's stamps (see restart_worker.cpp), in ms after the crash.
struct RestartStamps {
  double first_start_ms = 0.0;          // the first replacement worker entered main
  double last_start_ms = 0.0;           // the last one did
  std::optional<double> first_term_ms;  // the first survivor got SIGTERM
};

// Empty if the crash stamp or any of the `nproc` start stamps is missing.
std::optional<RestartStamps> readRestartStamps(const std::filesystem::path& dir, int nproc);

// The last `lines` lines of a text file, each indented by two spaces (to
// sit inside a Markdown list item); empty for an empty or missing file.
std::string tailOf(const std::filesystem::path& path, int lines);

// How many CPUs other processes kept busy from construction to cores(), on
// average: the machine's busy time less ours and our launchers' (with their
// workers). Says how far a section's figures were disturbed.
class OtherCpu {
 public:
  OtherCpu();
  double cores() const;

 private:
  std::chrono::steady_clock::time_point wall_;
  double busy_ = 0.0;
  double own_ = 0.0;
};

// This process's environment, NAME=value.
std::vector<std::string> currentEnvironment();

// currentEnvironment() less what launch_bench sets per run and the agents'
// own settings (PET_*, TORCHELASTIC_*), which must not leak in from the caller.
std::vector<std::string> launcherBaseEnvironment();

}  // namespace ddprun::bench

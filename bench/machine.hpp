// What a benchmark reads about itself and the machine it shares: CPU time
// (its own, its children's, everyone's) and where its sibling programs are.
// The functions are stateless; any thread.
#pragma once

#include <chrono>
#include <filesystem>
#include <string>

namespace ddprun::bench {

// CPU seconds the whole machine has spent busy (all CPUs, from /proc/stat),
// to tell how much of a window other people's processes used.
double machineBusySeconds();

// CPU seconds this process has used (user + system); with include_children,
// also every descendant it (or a launcher under it) has reaped.
double processCpuSeconds(bool include_children = false);

// "load average: 0.42, 0.61, 0.80" (1, 5 and 15 minutes), as uptime prints it.
std::string loadAverageText();

// MemAvailable from /proc/meminfo, in MiB.
double memAvailableMiB();

// "2 CPUs, MemAvailable 21.3 GiB, load average: ...": the machine a run
// shared, for a report's setup line.
std::string machineText();

// The directory holding the running executable (for sibling programs).
std::filesystem::path selfDirectory();

// A program the bench runs: where this build tree put it (`built`, a path
// CMake passed, or null), else `sibling` next to the running executable.
std::string builtPath(const char* built, const char* sibling);

// How many CPUs other processes kept busy from construction to cores(), on
// average: the machine's busy time less ours and our launchers' (with their
// workers). Says how far a section's figures were disturbed. Owns only the
// readings it started from; used by the thread that made it.
class OtherCpu {
 public:
  OtherCpu();
  double cores() const;

 private:
  std::chrono::steady_clock::time_point wall_;
  double busy_ = 0.0;
  double own_ = 0.0;
};

}  // namespace ddprun::bench

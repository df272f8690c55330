// What /proc says about a live process (a daemon under test, a launcher
// under a benchmark): its memory, its CPU time, its children by name,
// which of ddprun's two processes is the agent, and the processes whose
// command line holds a marker. Stateless.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <optional>
#include <string>

namespace ddprun::test_support {

// A field of /proc/<pid>/status given in kB (VmRSS, VmHWM, ...), in KiB;
// nullopt once the process is gone (a zombie has no memory left to report).
std::optional<std::size_t> procStatusKiB(pid_t pid, const char* field);

// The process's proportional set size (Pss in /proc/<pid>/smaps_rollup), in
// KiB: each page it shares counted as its share, so the figures of processes
// that share pages add up to what they hold together. nullopt once it is
// gone, or where smaps_rollup cannot be read (a kernel before 4.14, another
// user's process).
std::optional<std::size_t> procPssKiB(pid_t pid);

// How many threads the process has (/proc/<pid>/status Threads); nullopt
// once it is gone.
std::optional<std::size_t> threadCountOf(pid_t pid);

// User + system CPU seconds the process has used so far; 0 once it is gone.
double cpuSecondsOf(pid_t pid);

// A child of `parent` whose command name (/proc/<pid>/comm) is `name`;
// nullopt when it has none (yet, or any more).
std::optional<pid_t> childNamed(pid_t parent, const std::string& name);

// Live processes (not zombies) whose command line holds `marker`, every
// process of the machine read; with `program`, only those whose argv[0]
// ends with it. What a test counts to show nothing of a job is left.
int processesWith(const std::string& marker, const std::string& program = "");

// ddprun's agent process: the child named ddprun of the pid ddprun was
// started as (which stays behind as its guardian); that pid if there is none
// (yet, or any more).
pid_t ddprunAgentOf(pid_t ddprun);

}  // namespace ddprun::test_support

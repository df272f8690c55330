// What /proc says about a worker's process tree: who a process's parent and
// session are, its children, and the CPU time a tree has used. Read on
// demand (nothing is cached); a process that is gone reads as nullopt or
// nothing. Stateless free functions; any thread.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <vector>

namespace ddprun::launcher {

struct ProcStat {
  char state = '?';  // R, S, D, Z, ...
  pid_t ppid = 0;
  pid_t pgrp = 0;
  pid_t session = 0;
  // utime + stime + cutime + cstime in clock ticks: the process's own CPU
  // time and that of the children it has reaped.
  std::uint64_t cpu_ticks = 0;
};

// /proc/<pid>/stat, or nullopt when the process is gone (or unreadable).
std::optional<ProcStat> readProcStat(pid_t pid);

// Whether `pid` has a handler for `signal` or ignores it (SigCgt, SigIgn in
// /proc/<pid>/status): sent the signal, it does not take the default action
// (which ends the process for SIGUSR1 and SIGUSR2). A signal it only blocks
// is not handled: it takes the default action once unblocked (a shell
// blocks every signal around each fork). False when the process is gone.
bool handlesSignal(pid_t pid, int signal);

// The children of every thread of `pid` (/proc/<pid>/task/*/children);
// empty if the kernel lacks that file (CONFIG_PROC_CHILDREN).
std::vector<pid_t> childrenOf(pid_t pid);

// `root` and all its descendants, found through childrenOf.
std::vector<pid_t> processTree(pid_t root);

// The CPU time of `root` and its live descendants, with what they reaped;
// nullopt when `root` is gone.
std::optional<std::uint64_t> treeCpuTicks(pid_t root);

// Whether `pid` is `root` or belongs to it: a descendant (through its
// parents), or a process in the session `root` leads (each worker leads its
// own session, so children that were orphaned still count).
bool belongsTo(pid_t pid, pid_t root);

}  // namespace ddprun::launcher

// How many workers this machine lets one agent supervise, checked before
// anything is forked, so that too many is one line naming the limit at once
// rather than thousands of forks and then a pipe or fork error.
//
// Each worker costs the agent kDescriptorsPerWorker descriptors while it runs
// (its stdout and stderr pipes, their log files, its pidfd and the loop's
// watch on it), counted against RLIMIT_NOFILE with what the agent holds
// already and kAgentDescriptors for its own (loop, signals, stores, logs);
// and one process, against RLIMIT_NPROC (which the kernel does not apply to
// root) and the kernel's pid_max. Connections of workers to a store this
// agent hosts are not counted: the store retries an accept that finds no
// descriptor.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace ddprun::launcher {

inline constexpr std::uint64_t kDescriptorsPerWorker = 6;
inline constexpr std::uint64_t kAgentDescriptors = 32;

struct ProcessLimits {
  std::uint64_t open_files = 0;  // RLIMIT_NOFILE's soft limit; 0: unlimited
  std::uint64_t open_now = 0;    // descriptors this process holds already
  std::uint64_t processes = 0;   // RLIMIT_NPROC's soft limit; 0: unlimited or not applied
  std::uint64_t pid_max = 0;     // /proc/sys/kernel/pid_max; 0: unknown
};

// This process's limits (RLIMIT_NPROC as 0 for root, which it does not bind).
ProcessLimits currentProcessLimits();

// nullopt when `nproc` workers fit in `limits`; otherwise one line naming the
// limit that is exceeded, the number needed and the limit's value, e.g.
// "100000 workers need 600037 file descriptors in ddprun, over its limit of
// 20000 (RLIMIT_NOFILE; raise it with ulimit -n)".
std::optional<std::string> workerLimitProblem(int nproc, const ProcessLimits& limits);

}  // namespace ddprun::launcher

// How one agent's run of its workers ended: the exit status it implies, every
// failure (root cause first) and why the run stopped. A plain value the
// Agent returns and the rendezvous backend and main read.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

#include "ddprun/launcher/process/subprocess.hpp"

namespace ddprun::launcher {

// Why ddprun itself ended a worker: a watchdog's verdict (its file timer,
// --worker-hang-timeout, --progress-timeout). Empty when the worker failed on
// its own.
struct WorkerVerdict {
  std::string reason;      // "hung: no output and no CPU time for 30 s (stack below)"
  std::string stack;       // what the stack tools printed (or why there is none)
  std::string stack_file;  // where the whole stack was saved; empty if nowhere
  // Where each other local worker was when this one was judged hung: a line
  // each naming its stack file, or its stacks when they have no file.
  std::string peer_stacks;
  bool empty() const { return reason.empty(); }
};

// One worker's failure, for the report.
struct WorkerFailure {
  int attempt = 0;
  int rank = 0;
  int local_rank = 0;
  pid_t pid = -1;
  ExitStatus status;
  std::string error_file;  // the worker's TORCHELASTIC_ERROR_FILE
  std::chrono::system_clock::time_point time;
  std::chrono::steady_clock::time_point monotonic;  // orders the root cause
  WorkerVerdict verdict;                            // why ddprun killed it, if it did
};

// The exit status of a job ended as a crash loop (--max-unproductive-restarts):
// restarting it again would fail at the same step, so a scheduler should not
// requeue it. Documented in docs/launcher.md (Exit status).
inline constexpr int kCrashLoopExitCode = 120;
// The exit status of an agent whose node failed its health check before a
// join (health_check.hpp), or whose host the rendezvous quarantined until
// the job ended without it (c10d_rendezvous.cpp, etcd_rendezvous.cpp): the
// node should be looked at or replaced. Documented there too.
inline constexpr int kUnfitExitCode = 121;
// The exit status of an agent one of whose workers (or what they started) is
// stuck in the kernel: in uninterruptible sleep past
// TORCHELASTIC_UNINTERRUPTIBLE_STATE_TIMEOUT, or alive that long after its
// SIGKILL (agent_stuck.cpp). No restart can use the node: it should be
// replaced. Documented in docs/launcher.md too.
inline constexpr int kStuckWorkerExitCode = 122;

struct RunResult {
  int exit_code = 0;  // 0, the root cause's shell code, or 128 + signal
  // The last attempt's failures, root cause first; none after a handled
  // signal (a worker that ends once ddprun was told to stop has not failed).
  std::vector<WorkerFailure> failures;
  int attempts = 0;               // attempts that started workers
  bool started = false;           // a worker group was formed at least once
  int signal = 0;                 // the handled signal that stopped the run, if any
  bool closed_elsewhere = false;  // the rendezvous ended the job on another node first
  std::string error;              // why the run could not go on (one line), if it could not
  // Why the run ended as a crash loop (one line), if it did; exit_code is
  // then kCrashLoopExitCode.
  std::string crash_loop;
  // This node left the job as unfit, which goes on without it where it can,
  // as after a signal: it failed its health check (exit_code
  // kUnfitExitCode), or a process of its workers is stuck (below).
  bool left_unfit = false;
  // Each process stuck in the kernel, in a line naming it, its state, wchan
  // and kernel stack; exit_code is then kStuckWorkerExitCode.
  std::vector<std::string> stuck;
};

// Sorts the failures root cause first: by when each worker recorded its
// failure in its error file (extraInfo.monotonic_ns, CLOCK_MONOTONIC like
// ours), else by when its exit was seen. A worker that fails first may be
// seen exiting after a peer it took down; the recorded time still puts it
// first.
void orderRootCauseFirst(std::vector<WorkerFailure>& failures);

}  // namespace ddprun::launcher

// SnapshotSignal: SIGUSR1 as a request for a snapshot, as a scheduler sends it
// before a job's time limit (Slurm's --signal=USR1@60; ddprun forwards it to
// its workers too). Copies within a second of each other are one request:
// under srun every worker gets Slurm's copy and ddprun's, milliseconds apart.
//
// SIGUSR1 is blocked in the thread that constructs it, and so in every
// thread started after (LibTorch's, Gloo's), and is taken by a thread of its
// own with sigwaitinfo: it never interrupts a system call of Gloo or of the
// store. A handler is installed as well, which only a thread started before
// it could run (it asks the same); it shows ddprun that the worker handles
// SIGUSR1, which ddprun forwards only to workers that do. Construct it first
// in main(), before any other thread exists. Owns that thread (joined by
// the destructor). takeRequest() may be called from any thread.
#pragma once

#include <signal.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace ddprun::worker {

class SnapshotSignal {
 public:
  SnapshotSignal();
  ~SnapshotSignal();
  SnapshotSignal(const SnapshotSignal&) = delete;
  SnapshotSignal& operator=(const SnapshotSignal&) = delete;

  // True once for each request that came since the last call.
  bool takeRequest() { return requested_.exchange(false); }

  // The job's request was answered (any rank's copy asked for it): this
  // rank's own copies of that request, pending or arriving within the same
  // second, ask for nothing more. Each rank takes its request at its next
  // epoch, so without this a copy that reached one rank just after an epoch
  // boundary asked a second snapshot one epoch later.
  void answered();

  // From the handler: a request, as the waiter would take it (an atomic
  // store, async-signal-safe).
  void requestFromHandler() { requested_ = true; }

 private:
  void waitForSignals();

  std::atomic<bool> requested_{false};
  // When the last request was taken as one, in steady_clock ticks; written
  // by the waiter and by answered().
  std::atomic<std::chrono::steady_clock::rep> last_request_{0};
  std::atomic<bool> stopping_{false};
  struct sigaction previous_ {};  // SIGUSR1's action before, restored by the destructor
  std::thread waiter_;
};

}  // namespace ddprun::worker

// The per-node agent's supervision: runs the local worker group to the end.
//
// Each attempt asks the rendezvous for its group (on a waiter thread, so the
// agent's loop still handles signals while it waits), spawns one worker per
// local rank with its environment, waits for exits on pidfds and for the
// agent's signals on one Asio io_context (the thread that calls run(); no
// polling), and on a worker failure stops the group (SIGTERM to every
// worker's process group, the shutdown timeout, SIGKILL) and restarts it,
// until max_restarts is spent. Watchdogs (the file timer, the hang timeout)
// may condemn a running worker; it is killed and fails like a crash. A worker
// stuck in the kernel (in uninterruptible sleep past the D-state timeout, or
// alive that long after its SIGKILL) ends the run instead: no restart can
// use the node (kStuckWorkerExitCode, agent_stuck.cpp). A group the rendezvous
// declares over (the membership changed) is stopped and restarted without counting. A handled
// signal is forwarded to the workers, then the group is stopped the same way; SIGUSR1 and
// SIGUSR2, unless handled, are only forwarded (forwardedOnlySignals()).
// An error on the loop or the waiter thread (a worker that cannot be spawned,
// a rendezvous that never formed) stops the workers and ends the run with
// RunResult::error; run() itself never throws. Nothing the workers start
// outlives its attempt: the agent is a child subreaper and kills what they
// leave (process_tree.hpp). Owns the workers and the waiter thread, joined
// before run() returns; run() is called once.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ddprun/launcher/agent/flight_recorder.hpp"
#include "ddprun/launcher/config/worker_environment.hpp"
#include "ddprun/launcher/core/progress_timeout.hpp"
#include "ddprun/launcher/core/rendezvous.hpp"
#include "ddprun/launcher/core/run_result.hpp"
#include "ddprun/launcher/core/worker_output.hpp"

namespace ddprun::launcher {

class WorkerCgroup;
class AgentEvents;
class LoopHeartbeat;

struct AgentConfig {
  int nproc_per_node = 1;
  int max_restarts = 0;
  std::chrono::milliseconds shutdown_timeout{30'000};
  // TORCHELASTIC_UNINTERRUPTIBLE_STATE_TIMEOUT: a running worker in
  // uninterruptible sleep this long is stuck, and a SIGKILLed process alive
  // this long after it is too. Zero (torch's default): no D-state check, and
  // a SIGKILLed process gets max(shutdown_timeout, kLeftoverWait) to die.
  std::chrono::milliseconds uninterruptible_timeout{0};
  std::vector<int> signals_to_handle;
  // Where every attempt's group comes from. Borrowed: it outlives run().
  Rendezvous* rendezvous = nullptr;
  // Every worker's environment: the agent's own, defaults, the contract.
  WorkerEnvironment environment{WorkerEnvironment::Job{}, {}};
  // The worker's argv for a local rank (e.g. python -u train.py ...).
  std::function<std::vector<std::string>(int local_rank)> command;
  // Where each worker's output goes, per attempt; unset: the console only.
  std::function<WorkerOutput(int local_rank, int rank, int attempt)> output;
  std::string hostname;
  // Watchdogs (docs/torchrun-contract.md §7.6), each off unless set: torch's
  // file timer served at this named pipe (TORCHELASTIC_TIMER_FILE),
  // --worker-hang-timeout and --progress-timeout (read from each worker's
  // DDPRUN_PROGRESS_EVENTS file). A worker they kill fails like a crash.
  std::string timer_file;
  std::chrono::milliseconds worker_hang_timeout{0};
  ProgressTimeout progress_timeout;
  // --max-unproductive-restarts: after this many failed attempts in a row
  // that got no further than the best step before them (the workers'
  // progress reports), the run ends with kCrashLoopExitCode whatever
  // max_restarts allows; 0: never.
  int max_unproductive_restarts = 3;
  // Whether this node may join round number `join` (0: the first), asked
  // on the waiter thread before each join: nullopt when it is fit, else
  // why not; the run then ends with kUnfitExitCode. Unset: always fit.
  std::function<std::optional<std::string>(int join)> health_check;
  std::string tools_path = "/usr/bin:/bin";  // PATH for gdb and py-spy
  // The CPUs each local rank's worker is bound to (--numa-binding,
  // numa_binding.hpp), indexed by local rank; empty: no binding.
  std::vector<std::vector<int>> worker_cpus;
  // The job's cgroup the workers join (worker_cgroup.hpp), asked for once,
  // on the loop, just before the first worker starts: ddprun's guardian
  // makes it meanwhile, and the agent's set-up does not wait for it. What it
  // returns is borrowed and outlives run(); unset, or null: none.
  std::function<WorkerCgroup*()> job_cgroup;
  // A pidfd of ddprun's guardian (-1: none), readable once it has died, as
  // when `kill -9` hits ddprun's pid: everything the agent started is then
  // SIGKILLed and the agent exits at once, as ddprun's SIGKILL did before
  // there was a guardian. Borrowed.
  int guardian_pidfd = -1;
  // Who watches the agent's life (the metrics, the timeline), told on the
  // loop thread; borrowed; null: nobody.
  AgentEvents* events = nullptr;
  // Beaten about once a second from the loop while run() runs, for
  // /healthz; borrowed; null: nobody asks.
  LoopHeartbeat* heartbeat = nullptr;
};

class Agent {
 public:
  explicit Agent(AgentConfig config);
  ~Agent();
  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;

  RunResult run();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The signals the agent passes on to its running workers and nothing more:
// SIGUSR1 and SIGUSR2 (a scheduler's warning before a time limit, such as
// Slurm's --signal=USR1@60, for workers to save a snapshot), unless
// `signals_to_handle` names them, which makes them stop the run as torchrun
// does.
std::vector<int> forwardedOnlySignals(const std::vector<int>& signals_to_handle);

// Sets forwardedOnlySignals() to be ignored by this process, for the times
// no agent's loop forwards them (from main's first line until Agent::run(),
// and after it, while ddprun waits at the exit barrier): a warning signal
// must never end ddprun.
// Workers never inherit it: Subprocess resets every disposition.
void ignoreForwardedOnlySignals(const std::vector<int>& signals_to_handle);

// torchrun's failure table: time, host, rank, local rank, exit code or
// signal name, pid, error file and the message/traceback torch's @record
// wrote there, for the root cause and then the other failures; then, where
// NCCL's Flight Recorder left dumps, what torch's analyser made of them.
std::string formatFailureReport(const RunResult& result, const std::string& hostname,
                                const std::string& program,
                                const FlightRecorderVerdict& flight_recorder = {});

}  // namespace ddprun::launcher

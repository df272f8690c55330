// The agent's watchdogs over its running workers (docs/torchrun-contract.md
// §7.6), each only when asked for:
//   - torch's file timer (AgentConfig::timer_file): a worker whose deadline
//     in some scope passed gets the signal its FileTimerClient asked for
//     (SIGKILL by default), sent to the pid that armed the timer, as torch
//     does, but only when that pid is one of this agent's running workers or
//     belongs to one (a descendant, or in the session the worker leads);
//   - --worker-hang-timeout: a worker with no output and no CPU time for that
//     long is hung;
//   - --progress-timeout: a worker that reported progress (ProgressWatch) and
//     then none for that long is hung, however busy its CPU;
//   - TORCHELASTIC_UNINTERRUPTIBLE_STATE_TIMEOUT: a worker in uninterruptible
//     sleep for that long is stuck in the kernel (UninterruptibleWatch). Not
//     a hang to kill and restart: no restart can use the node, so the agent
//     (Hooks::stuck) stops the group and ends (agent_stuck.cpp).
// Before a hung worker is killed, or a file timer's signal is sent, the
// stacks of every local worker are captured at once (HungForensics) and
// saved in each one's attempt directory; then the hung worker's process
// group is SIGKILLed.
// They decide that a worker must die and why; the agent agrees (through
// Hooks::condemn) only while it still runs that worker in its running group,
// records the verdict with the worker's failure and handles the exit as any
// crash: the group is stopped and restarted while --max-restarts allows.
//
// Runs on the agent's io_context (FileTimer, HangWatch, ProgressWatch,
// UninterruptibleWatch and HungForensics are all driven by it); no thread. Created by the agent for
// its whole run; with no watchdog configured and no progress file given it does nothing.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ddprun/launcher/core/option_values.hpp"
#include "ddprun/launcher/core/progress_timeout.hpp"
#include "ddprun/launcher/core/run_result.hpp"
#include "ddprun/launcher/watchdogs/timer_requests.hpp"
#include "ddprun/net/asio.hpp"

namespace ddprun::launcher {

class FileTimer;
class HangWatch;
class HungForensics;
class ProgressWatch;
class UninterruptibleWatch;

// One worker's stacks, taken when a worker of its group was judged hung.
struct WorkerStacks {
  std::size_t index = 0;  // its local rank
  pid_t pid = 0;
  std::string text;  // what the tools printed, or why there is nothing
  std::string file;  // where it was saved; empty: nowhere
};

class WorkerWatchdogs {
 public:
  struct Options {
    std::string timer_file;                       // the FIFO to serve; empty: no file timer
    std::chrono::milliseconds hang_timeout{0};    // zero: no hang detection
    ProgressTimeout progress_timeout;             // off by default
    std::string path_variable = "/usr/bin:/bin";  // where to find gdb and py-spy
    std::chrono::milliseconds uninterruptible_timeout{0};  // zero: no D-state check
  };
  // What the watchdogs ask of the agent.
  struct Hooks {
    // Does the worker at `index` still run in a group that is not being
    // stopped? (Nothing is worth a stack capture otherwise.)
    std::function<bool(std::size_t index)> runs;
    // May the watchdog kill that worker for `verdict`? True when it runs;
    // the agent then keeps the verdict for the worker's failure.
    std::function<bool(std::size_t index, const WorkerVerdict& verdict)> condemn;
    // Asks the agents of the group's other nodes for their workers' stacks,
    // since worker `index` hung for `reason`; `done` runs on the loop with
    // what they answered (one line each; empty: no other node). Empty
    // function: nobody to ask.
    std::function<void(std::size_t index, const std::string& reason,
                       std::function<void(std::string answers)> done)>
        ask_peers{};
    // The worker at `index` has been in uninterruptible sleep for `in_d`:
    // true when the agent takes it (it still runs that worker). Unset:
    // never taken.
    std::function<bool(std::size_t index, std::chrono::milliseconds in_d)> stuck{};
  };
  // What this node answers a peer's request: one line per local worker.
  using Answer = std::function<void(std::string where)>;

  // Creates the file timer's FIFO when asked for; throws ddprun::Error if it
  // cannot.
  WorkerWatchdogs(net::asio::io_context& io, Options options, Hooks hooks);
  ~WorkerWatchdogs();
  WorkerWatchdogs(const WorkerWatchdogs&) = delete;
  WorkerWatchdogs& operator=(const WorkerWatchdogs&) = delete;

  // A new attempt: every timer and watch of the last one is forgotten.
  void attemptStarted();
  // The worker at `index` (its local rank) runs as `pid`; a stack captured
  // for it is saved next to its `error_file` (if not empty). It reports its
  // progress to `progress_file` (empty: it has none to report to). With
  // `faulthandler` (armed in its environment), a Python worker judged hung
  // is stopped with SIGABRT, so that it prints its Python stacks, and
  // SIGKILLed if it is still there 2 s later.
  void workerStarted(std::size_t index, pid_t pid, const std::string& error_file,
                     const std::string& progress_file = {}, bool faulthandler = false);
  // What the output relays call on each chunk of that worker's output; empty
  // when there is no hang detection (nothing to call).
  std::function<void()> outputObserver(std::size_t index);
  void workerExited(std::size_t index);
  // Another node's worker hung: every local worker's stacks are taken and
  // saved as for a local hang, and `answer` runs on the loop with where they
  // are. Nothing is killed: the group stops as the other node fails.
  void captureForPeer(const Answer& answer);
  // Another node asked for this attempt's stacks: its Python workers are
  // then stopped so that they print theirs too.
  bool peerAskedForStacks() const { return peer_hang_; }
  // The highest step a worker of this attempt reported; nullopt when none
  // did.
  std::optional<std::int64_t> bestStep();
  // The highest step after which a worker of this attempt reported a
  // snapshot; nullopt when none did.
  std::optional<std::int64_t> bestSnapshot();
  // Final: every timer, read and capture stops, so the loop can end.
  void stop();

 private:
  struct Running {
    pid_t pid = 0;
    std::string error_file;
    bool faulthandler = false;
  };
  // What happens to a hung worker once every stack is in.
  using Kill = std::function<void()>;
  // One hang's forensics: this node's stacks and the other nodes' answers,
  // both awaited before the kill.
  struct HangRound {
    unsigned generation = 0;  // of the attempt it was started in
    std::size_t index = 0;
    pid_t pid = 0;
    std::string reason;
    Kill kill;
    std::vector<WorkerStacks> stacks;
    std::string peer_answers;
    int pending = 2;
  };
  void roundPartDone(const std::shared_ptr<HangRound>& round);
  void onTimersExpired(const ExpiredTimers& expired);
  bool onHung(std::size_t index, pid_t pid);
  bool onStalled(std::size_t index, pid_t pid, const std::string& reason);
  // Kills the hung worker at `index`: SIGABRT first when it prints its
  // Python stacks on one, SIGKILL otherwise or when that is not enough.
  void killHung(std::size_t index, pid_t pid);
  // Captures every running worker's stacks, then condemns the one at
  // `index` with `reason` and runs `kill`. False when a capture runs.
  bool captureThenKill(std::size_t index, pid_t pid, std::string reason, Kill kill);
  void onStacks(HangRound& round);

  Options options_;
  Hooks hooks_;
  std::map<std::size_t, Running> running_;
  std::unique_ptr<FileTimer> file_timer_;
  std::unique_ptr<HangWatch> hang_watch_;
  std::unique_ptr<ProgressWatch> progress_watch_;
  std::unique_ptr<UninterruptibleWatch> uninterruptible_watch_;
  std::unique_ptr<HungForensics> forensics_;
  net::asio::steady_timer abort_deadline_;  // SIGKILL for a SIGABRT not obeyed
  std::shared_ptr<HangRound> hang_;         // the hang whose stacks are awaited
  unsigned generation_ = 0;                 // attempts started: a stale round stops
  bool peer_hang_ = false;                  // another node judged this attempt hung
};

}  // namespace ddprun::launcher

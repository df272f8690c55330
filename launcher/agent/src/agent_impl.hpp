// Agent::Impl: the agent's state and its handlers, shared by agent.cpp (the
// attempts and the workers' exits), agent_start.cpp (starting the workers),
// agent_stop.cpp (stopping, signals, the end) and agent_stuck.cpp (processes
// stuck in the kernel).
// Owns the workers, the loop, the waiter thread and the spawner (with its
// thread, which starts half of each group); everything else but the
// waiter runs on the thread that called Agent::run(). Private to the agent.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "ddprun/launcher/agent/agent.hpp"
#include "ddprun/launcher/core/agent_events.hpp"
#include "ddprun/launcher/output/line_relay.hpp"
#include "ddprun/launcher/process/parallel_spawn.hpp"
#include "ddprun/launcher/supervision/exit_watch.hpp"
#include "ddprun/launcher/supervision/process_tree.hpp"
#include "ddprun/launcher/watchdogs/worker_watchdogs.hpp"
#include "ddprun/net/asio.hpp"

namespace ddprun::launcher {

struct Agent::Impl {
  using Clock = std::chrono::steady_clock;

  // A worker before its process starts: what launchAttempt made for it.
  struct PreparedWorker {
    int local_rank = 0;
    int rank = 0;
    std::string error_file;
    WorkerEnd out;  // the write ends of its output's relays, open until it runs
    WorkerEnd err;
  };

  struct Worker {
    Subprocess process;
    std::unique_ptr<ExitWatch> exit_watch;
    int local_rank = 0;
    int rank = 0;
    bool exited = false;
    std::string error_file;
    WorkerVerdict verdict;      // why a watchdog killed it, if one did
    bool faulthandler = false;  // armed: SIGABRT makes it print its Python stacks
    bool stuck = false;         // named in result.stuck already
  };

  // Waiting: for the rendezvous to form this node's next group.
  enum class Phase { Waiting, Running, Stopping, Done };

  explicit Impl(AgentConfig agent_config)
      : config(std::move(agent_config)),
        rendezvous(*config.rendezvous),
        signals(io),
        grace(io),
        relays(io),
        watchdogs(io,
                  {config.timer_file, config.worker_hang_timeout, config.progress_timeout,
                   config.tools_path, config.uninterruptible_timeout},
                  {[this](std::size_t index) { return runs(index); },
                   [this](std::size_t index, const WorkerVerdict& verdict) {
                     return condemn(index, verdict);
                   },
                   [this](std::size_t index, const std::string& reason,
                          std::function<void(std::string)> done) {
                     askPeersForStacks(index, reason, std::move(done));
                   },
                   [this](std::size_t index, std::chrono::milliseconds in_d) {
                     return onUninterruptible(index, in_d);
                   }}),
        tree(io) {}
  ~Impl() { joinWaiter(); }

  void runLoop();
  void startAttempt();
  void onGroup(std::optional<WorkerGroup> next, const std::exception_ptr& error);
  void onUnfit(const std::string& why);
  void launchAttempt(const WorkerGroup& next);
  void onGroupOver(int newer_attempt);
  PreparedWorker prepareWorker(int local_rank, SpawnOptions& options);
  void addWorker(const PreparedWorker& prepared, const SpawnOptions& options, Subprocess process,
                 Clock::time_point started_at);
  void onExit(std::size_t index);
  WorkerFailure failureOf(const Worker& worker, const ExitStatus& status) const;
  bool runs(std::size_t index) const;
  bool condemn(std::size_t index, const WorkerVerdict& verdict);
  // Stops the running group with `signal`, telling the observers why. With
  // `python_stacks`, a Python worker armed with faulthandler is stopped with
  // SIGABRT instead, so that it prints every thread's Python stack first.
  void stopGroup(int signal, AgentEvents::StopReason reason, bool python_stacks = false);
  // The observers, or one that ignores everything.
  AgentEvents& events() { return config.events != nullptr ? *config.events : nobody_watches; }
  void afterStop();
  // afterStop(), once what the workers left is dead.
  void afterLeftovers();
  // agent_stuck.cpp: how long a SIGKILLed process gets to die; a running
  // worker's verdict; the stopped workers, and then what they left, still
  // alive after that long; the end.
  std::chrono::milliseconds killWait() const;
  bool onUninterruptible(std::size_t index, std::chrono::milliseconds in_d);
  void onKilledButAlive();
  void awaitStuckLeftovers(std::vector<pid_t> still_alive, std::chrono::milliseconds waited);
  void abandon(std::size_t index);
  void endStuck();
  // Whether this attempt's failure ends a crash loop; counts the attempts
  // in a row that made no progress beyond the best step before them.
  bool endsCrashLoop();
  void checkFailure(bool restart_asked);
  void onFailureChecked(bool stands, bool restart_asked);
  void fail(const std::string& why);
  void finish(int exit_code);
  void joinWaiter();
  void beat();
  void waitForSignal();
  bool onStopRequest(int signal);
  void forwardToWorkers(int signal);
  // agent_peers.cpp: the hang forensics across nodes.
  void openPeerChannel();
  void askPeersForStacks(std::size_t index, const std::string& reason,
                         std::function<void(std::string)> done);
  void onStacksAsked(int attempt, const StackRequest& request);

  AgentConfig config;
  Rendezvous& rendezvous;
  net::asio::io_context io{1};
  net::asio::signal_set signals;
  net::asio::steady_timer grace;
  net::asio::steady_timer heartbeat_timer{io};
  // Declared before `workers`, so destroyed after them: its thread is the
  // parent (for PR_SET_PDEATHSIG) of the workers it started.
  ParallelSpawn spawner;
  std::vector<Worker> workers;
  WorkerRelays relays;
  WorkerWatchdogs watchdogs;
  ProcessTree tree;   // what the workers leave behind
  WorkerGroup group;  // the running attempt's
  AgentEvents nobody_watches;
  Clock::time_point rendezvous_started;   // of the wait in progress, or the last one
  int restarts_used = 0;                  // failures restarted, against max_restarts
  std::optional<std::int64_t> best_step;  // the highest step any earlier attempt reported
  // The same for snapshots, which judge the attempts while no step is reported.
  std::optional<std::int64_t> best_snapshot;
  int unproductive_in_a_row = 0;      // failed attempts that got no further than it
  bool unproductive_counted = false;  // this attempt is one of them
  int joins = 0;                      // asked of the rendezvous so far
  int running = 0;
  bool stop_killed = false;  // stopping this attempt's group has sent its workers SIGKILL
  Phase phase = Phase::Waiting;
  bool restart_after_stop = false;
  bool group_over = false;        // this stop is for a membership change
  bool after_failure = false;     // the next attempt restarts a failed one
  bool failure_checked = false;   // this attempt's failure was put to the rendezvous
  bool checking_failure = false;  // and the waiter thread still asks it
  bool awaiting_check = false;    // every worker has stopped: the answer decides what follows
  int newest_over = 0;            // the newest attempt the rendezvous said is coming
  std::thread waiter;             // blocks in rendezvous.nextGroup() off the loop
  RunResult result;
  std::unique_ptr<PeerChannel> peers;  // to the other nodes of the running group
  std::vector<int> forwarded_only;     // forwardedOnlySignals(config.signals_to_handle)
  std::map<int, Clock::time_point> last_request_at;  // each handled signal's last request
};

}  // namespace ddprun::launcher

// Event flow (all on the io_context of the thread that calls run()):
//
//   startAttempt -> waiter thread: rendezvous.nextGroup() (phase Waiting;
//        ^          signals still handled) -> onGroup -> spawn workers ->
//        |          watchExit (pidfd readable)
//        |                                |
//        |            success: all done -> finish(0)
//        |            failure or signal -> stopGroup: SIGTERM (or the signal)
//        |                                 to every group, grace timer
//        |                                 -> SIGKILL survivors on expiry
//        +---- restarts left (failure) <-- afterStop, once all have exited
//        +---- the group is over (rendezvous.watchGroup -> onGroupOver):
//              stopGroup, then the next group, not counted as a restart
//
// Watchdogs (WorkerWatchdogs: torch's file timer, --worker-hang-timeout) run on
// the same loop; a running worker they condemn is killed, and its exit is a
// failure like any other, with the watchdog's verdict as its reason.
//
// Exception boundaries: every handler on the loop may throw (a worker that
// cannot be spawned, a pipe that cannot be made); runLoop() catches it and
// fail() stops the workers and ends the run with RunResult::error. The waiter
// thread catches the rendezvous's exception and posts it to the loop. run()
// never throws, and joins the waiter thread before it returns.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <thread>

#include "agent_impl.hpp"
#include "ddprun/launcher/core/log.hpp"
#include "ddprun/launcher/core/loop_heartbeat.hpp"
#include "ddprun/launcher/core/option_values.hpp"

namespace ddprun::launcher {
namespace {

namespace asio = net::asio;

}  // namespace

// /healthz's evidence that this loop turns: a beat a second until finish().
void Agent::Impl::beat() {
  if (phase == Phase::Done) {
    return;
  }
  config.heartbeat->beat();
  heartbeat_timer.expires_after(std::chrono::seconds(1));
  heartbeat_timer.async_wait([this](const net::error_code& error) {
    if (!error) {
      beat();
    }
  });
}

void Agent::Impl::runLoop() {
  for (;;) {
    try {
      io.run();
      return;
    } catch (const std::exception& error) {
      fail(error.what());
    } catch (...) {
      fail("an unknown error on the agent's loop");
    }
  }
}

// Every attempt first waits for its group. That may take until another node
// arrives, so the wait runs on its own thread and this loop keeps handling
// signals; finish() cancels the wait.
void Agent::Impl::startAttempt() {
  phase = Phase::Waiting;
  rendezvous_started = Clock::now();
  events().rendezvousStarted(rendezvous_started);
  const auto askForGroup = [this, join = joins++] {
    std::optional<WorkerGroup> next;
    std::exception_ptr error;
    if (config.health_check) {
      if (std::optional<std::string> unfit = config.health_check(join)) {
        asio::post(io, [this, why = std::move(*unfit)] { onUnfit(why); });
        return;
      }
    }
    try {
      next = rendezvous.nextGroup();
    } catch (...) {
      error = std::current_exception();
    }
    asio::post(io, [this, next, error] { onGroup(next, error); });
  };
  if (rendezvous.answersAtOnce()) {
    askForGroup();  // nothing to wait for: no thread
    return;
  }
  joinWaiter();  // the previous wait has posted its result already
  waiter = std::thread(askForGroup);
}

void Agent::Impl::onGroup(std::optional<WorkerGroup> next, const std::exception_ptr& error) {
  if (phase != Phase::Waiting) {
    return;  // a signal ended the run meanwhile
  }
  if (error) {
    int status = 1;
    try {
      std::rethrow_exception(error);
    } catch (const ConfigError& what) {
      result.error = what.what();
      status = 2;  // a node rank claimed twice, different --nproc-per-node: bad flags
    } catch (const std::exception& what) {
      result.error = what.what();
    } catch (...) {
      result.error = "the rendezvous failed";
    }
    finish(status);
    return;
  }
  if (!next) {
    result.closed_elsewhere = true;
    orderRootCauseFirst(result.failures);
    finish(result.failures.empty() ? 0 : result.failures.front().status.shellCode());
    return;
  }
  if (next->attempt < newest_over) {
    startAttempt();  // the rendezvous moved past this group while it came
    return;
  }
  launchAttempt(*next);
}

// Kept out of the round: the node is not fit, and a replacement should
// take its place, so the agent ends rather than waiting to be fixed.
void Agent::Impl::onUnfit(const std::string& why) {
  if (phase != Phase::Waiting) {
    return;
  }
  result.error = "this node failed its health check and does not join: " + why;
  result.left_unfit = true;
  finish(kUnfitExitCode);
}

// The rendezvous moved past the running group (a node was lost or arrived):
// stop the workers and join the next one; not a failure.
void Agent::Impl::onGroupOver(int newer_attempt) {
  newest_over = std::max(newest_over, newer_attempt);  // news may beat its group here
  if (newer_attempt <= group.attempt || phase == Phase::Waiting || phase == Phase::Done) {
    return;  // news of the group running now, or nothing runs
  }
  if (phase == Phase::Stopping) {
    // Workers often fail first when a peer node dies (their connections
    // reset). With no restart asked for, that failure was the lost node's:
    // move to the new group without counting it.
    if (!restart_after_stop && result.signal == 0 && result.error.empty()) {
      restart_after_stop = true;
      group_over = true;
    }
    return;
  }
  log().info("the rendezvous moved on from round {}: stopping the workers", group.attempt);
  restart_after_stop = true;
  group_over = true;
  stopGroup(SIGTERM, AgentEvents::StopReason::kRoundOver,
            /*python_stacks=*/watchdogs.peerAskedForStacks());
}

void Agent::Impl::onExit(std::size_t index) {
  Worker& worker = workers[index];
  // The pidfd says it has exited; the rest of its group dies with it.
  const ExitStatus status = tree.reapWorker(worker.process, worker.local_rank);
  worker.exited = true;
  watchdogs.workerExited(index);
  --running;
  // A signal death while the group stops is the stop's doing, but for a
  // SIGKILL the agent had not sent yet: the worker's own or the OOM
  // killer's, which is a failure even when a peer's was seen first.
  const bool killed_by_another = status.code == SIGKILL && !stop_killed;
  const bool stopped_by_us =
      phase == Phase::Stopping && status.kind == ExitStatus::Kind::Signaled && !killed_by_another;
  // After a handled signal the job is being stopped on purpose (by the user,
  // a scheduler): a worker that ends then has not failed, whatever its status
  // (a Python one often exits 1 from its KeyboardInterrupt).
  const bool failed = !status.success() && !stopped_by_us && result.signal == 0;
  const WorkerFailure failure = failureOf(worker, status);
  if (failed) {
    result.failures.push_back(failure);
  }
  events().workerExited(worker.local_rank, worker.rank, worker.process.pid(), status, failed,
                        Clock::now());
  if (phase == Phase::Running && !status.success()) {
    restart_after_stop = restarts_used < config.max_restarts && !endsCrashLoop();
    if (restart_after_stop) {
      rendezvous.requestRestart(failure);  // every node moves to the next group
      if (group.group_world_size > 1) {
        checkFailure(/*restart_asked=*/true);  // while the workers stop: a lost node's?
      }
    }
    // A hung group's Python workers are stopped so that they print their
    // stacks: where each one was is what the hang's report needs most.
    stopGroup(SIGTERM, AgentEvents::StopReason::kFailure,
              /*python_stacks=*/!failure.verdict.stack.empty() || watchdogs.peerAskedForStacks());
    return;
  }
  if (running > 0) {
    return;
  }
  if (phase == Phase::Stopping) {
    afterStop();
  } else {
    finish(0);  // every worker succeeded
  }
}

namespace {

// "crash loop: 3 attempt(s) in a row failed without getting past step 412
// (this one reached step 410); ..."
std::string crashLoopLine(int in_a_row, bool by_steps, std::int64_t best,
                          std::optional<std::int64_t> reached, int limit) {
  const std::string what = by_steps ? "step " : "the snapshot of step ";
  const std::string this_one = reached    ? "this one reached " + what + std::to_string(*reached)
                               : by_steps ? "this one reported no step"
                                          : "this one reported no snapshot";
  return "crash loop: " + std::to_string(in_a_row) +
         " attempt(s) in a row failed without getting past " + what + std::to_string(best) + " (" +
         this_one + "); not restarted again (--max-unproductive-restarts " + std::to_string(limit) +
         ")";
}

}  // namespace

// Progress is the workers' reports of their steps, else, while none has
// reported a step, of the snapshots they saved (a worker that only says when
// it saved). With neither ever reported nothing can be told apart, and no
// attempt counts.
bool Agent::Impl::endsCrashLoop() {
  const std::optional<std::int64_t> step = watchdogs.bestStep();
  const bool by_steps = best_step || step;
  const std::optional<std::int64_t> reached = by_steps ? step : watchdogs.bestSnapshot();
  std::optional<std::int64_t>& best = by_steps ? best_step : best_snapshot;
  const bool productive = reached && (!best || *reached > *best);
  if (productive) {
    best = reached;
    unproductive_in_a_row = 0;
    return false;
  }
  if (!best) {
    return false;
  }
  ++unproductive_in_a_row;
  unproductive_counted = true;
  if (config.max_unproductive_restarts <= 0 ||
      unproductive_in_a_row < config.max_unproductive_restarts) {
    return false;
  }
  result.crash_loop = crashLoopLine(unproductive_in_a_row, by_steps, *best, reached,
                                    config.max_unproductive_restarts);
  log().error("{}", result.crash_loop);
  return true;
}

WorkerFailure Agent::Impl::failureOf(const Worker& worker, const ExitStatus& status) const {
  return {group.attempt,
          worker.rank,
          worker.local_rank,
          worker.process.pid(),
          status,
          worker.error_file,
          std::chrono::system_clock::now(),
          Clock::now(),
          worker.verdict};
}

// A watchdog's verdict stands only against a worker of the running group.
bool Agent::Impl::runs(std::size_t index) const {
  return phase == Phase::Running && index < workers.size() && !workers[index].exited;
}

bool Agent::Impl::condemn(std::size_t index, const WorkerVerdict& verdict) {
  if (!runs(index)) {
    return false;
  }
  workers[index].verdict = verdict;
  const Worker& worker = workers[index];
  std::string where = verdict.stack_file.empty() ? "" : "its own: " + verdict.stack_file + "\n";
  events().workerHung(worker.local_rank, worker.rank, verdict.reason, where + verdict.peer_stacks,
                      Clock::now());
  return true;
}

Agent::Agent(AgentConfig config) : impl_(std::make_unique<Impl>(std::move(config))) {}

Agent::~Agent() = default;

RunResult Agent::run() {
  Impl& impl = *impl_;
  for (int signal : impl.config.signals_to_handle) {
    impl.signals.add(signal);
  }
  impl.forwarded_only = forwardedOnlySignals(impl.config.signals_to_handle);
  for (int signal : impl.forwarded_only) {
    impl.signals.add(signal);
  }
  impl.waitForSignal();
  impl.relays.onResized([&impl] {
    for (auto& worker : impl.workers) {
      if (!worker.exited) {
        worker.process.signalGroup(SIGWINCH);
      }
    }
  });
  impl.tree.start(impl.config.guardian_pidfd, [&impl] { impl.rendezvous.abandon(); });
  impl.rendezvous.watchGroup([&impl](int newer_attempt) {
    asio::post(impl.io, [&impl, newer_attempt] { impl.onGroupOver(newer_attempt); });
  });
  asio::post(impl.io, [&impl] { impl.startAttempt(); });  // under runLoop's exception guard
  if (impl.config.heartbeat != nullptr) {
    asio::post(impl.io, [&impl] { impl.beat(); });
  }
  impl.runLoop();
  if (impl.config.heartbeat != nullptr) {
    impl.config.heartbeat->stop();
  }
  impl.rendezvous.watchGroup({});  // the rendezvous outlives this agent's loop
  impl.joinWaiter();
  return impl.result;
}

}  // namespace ddprun::launcher

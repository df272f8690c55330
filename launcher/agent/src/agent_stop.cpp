// The agent's ends: stopping a group (the signal, the grace, SIGKILL, and
// the wait for the SIGKILLed to die), what follows once every worker has
// exited (a restart, the next round, or the end), an error on the loop, the
// handled signals. See agent.cpp for the event flow.
#include <fmt/ranges.h>
#include <signal.h>

#include <algorithm>
#include <csignal>
#include <string>
#include <vector>

#include "agent_impl.hpp"
#include "ddprun/launcher/core/log.hpp"
#include "ddprun/launcher/core/option_values.hpp"
#include "ddprun/launcher/supervision/procfs.hpp"
#include "ddprun/launcher/watchdogs/python_stacks.hpp"

namespace ddprun::launcher {
namespace {

namespace asio = net::asio;
using Clock = std::chrono::steady_clock;

// The same signal twice within this is one request that reached both ddprun's
// guardian, which forwards it, and the agent (`pkill ddprun`, Slurm, systemd,
// `timeout`, `kill -INT -<pgid>`), not a second one. A terminal's Ctrl-C
// reaches the agent once: the guardian leaves the kernel's copies alone.
constexpr auto kOneRequest = std::chrono::milliseconds(200);

}  // namespace

void Agent::Impl::stopGroup(int signal, AgentEvents::StopReason reason, bool python_stacks) {
  phase = Phase::Stopping;
  events().groupStopping(reason, Clock::now());
  for (Worker& worker : workers) {
    if (worker.exited) {
      continue;
    }
    // Only the worker: its exit takes the rest of its group with it, and its
    // own DataLoader processes would print their stacks in between.
    if (!(python_stacks && worker.faulthandler && abortForPythonStacks(worker.process.pid()))) {
      worker.process.signalGroup(signal);
    }
  }
  if (running == 0) {
    asio::post(io, [this] { afterStop(); });
    return;
  }
  grace.expires_after(config.shutdown_timeout);
  grace.async_wait([this](const net::error_code& error) {
    if (error) {
      return;
    }
    stop_killed = true;
    for (Worker& worker : workers) {
      if (!worker.exited) {
        worker.process.signalGroup(SIGKILL);
      }
    }
    // Whoever SIGKILL leaves alive that long is stuck in the kernel.
    grace.expires_after(killWait());
    grace.async_wait([this](const net::error_code& killed) {
      if (!killed) {
        onKilledButAlive();
      }
    });
  });
}

void Agent::Impl::afterStop() {
  grace.cancel();
  if (phase == Phase::Done) {
    return;
  }
  // Before any restart; what outlives its SIGKILL that long gets the rest of
  // killWait() without blocking the loop.
  const auto waited = std::min<std::chrono::milliseconds>(killWait(), kLeftoverWait);
  LeftoverKill leftovers = tree.killLeftovers(group.attempt, waited);
  if (!leftovers.orphans.still_alive.empty()) {
    awaitStuckLeftovers(std::move(leftovers.orphans.still_alive), waited);
    return;
  }
  afterLeftovers();
}

void Agent::Impl::afterLeftovers() {
  if (!result.stuck.empty()) {
    endStuck();  // a worker was in uninterruptible sleep too long
    return;
  }
  if (!result.error.empty()) {
    finish(1);
    return;
  }
  if (checking_failure && result.signal == 0) {
    awaiting_check = true;  // onFailureChecked() comes back here
    return;
  }
  if (restart_after_stop && result.signal == 0) {
    restart_after_stop = false;
    if (!group_over) {
      ++restarts_used;  // a membership change is not a failure
      after_failure = true;
      events().restarting(restarts_used, config.max_restarts, Clock::now());
    }
    group_over = false;
    startAttempt();
    return;
  }
  if (result.signal != 0) {
    finish(128 + result.signal);
    return;
  }
  if (!failure_checked) {
    checkFailure(/*restart_asked=*/false);
    awaiting_check = true;  // then here again, or on to the next group
    return;
  }
  orderRootCauseFirst(result.failures);
  if (!result.crash_loop.empty()) {
    finish(kCrashLoopExitCode);
    return;
  }
  finish(result.failures.empty() ? 1 : result.failures.front().status.shellCode());
}

// The workers failed; the rendezvous may not have said yet that their group
// was over (a lost peer resets their connections first). Asked off the loop,
// while the workers stop when a restart was asked for, after they stopped
// when none is left: a silent host takes up to the keep-alive bound to be
// lost, and signals must still be handled meanwhile.
void Agent::Impl::checkFailure(bool restart_asked) {
  failure_checked = true;
  checking_failure = true;
  joinWaiter();  // the wait for this group has posted its result already
  waiter = std::thread([this, restart_asked, attempt = group.attempt] {
    bool stands = true;
    try {
      stands = rendezvous.failureStands(attempt, restart_asked);
    } catch (const std::exception& error) {
      log().warn("could not ask the rendezvous whether round {} still stands: {}", attempt,
                 error.what());
    }
    asio::post(io, [this, stands, restart_asked] { onFailureChecked(stands, restart_asked); });
  });
}

void Agent::Impl::onFailureChecked(bool stands, bool restart_asked) {
  checking_failure = false;
  if (phase != Phase::Stopping) {
    return;  // a signal or an error ended the run meanwhile
  }
  if (!stands && !group_over) {
    log().info("the workers failed as round {} {}: joining the next round, no restart counted",
               group.attempt, restart_asked ? "lost a node" : "ended elsewhere (a node was lost)");
    restart_after_stop = true;
    group_over = true;
    if (unproductive_counted) {
      --unproductive_in_a_row;  // the lost node's failure says nothing of progress
      unproductive_counted = false;
    }
    result.crash_loop.clear();
  }
  if (awaiting_check) {
    awaiting_check = false;
    afterLeftovers();
  }
}

// An error on the loop: no restart; the workers are stopped and the run ends
// with exit status 1 and the error's line.
void Agent::Impl::fail(const std::string& why) {
  if (phase == Phase::Done) {
    return;
  }
  if (result.error.empty()) {
    result.error = why;
  }
  restart_after_stop = false;
  if (phase == Phase::Running) {
    stopGroup(SIGTERM, AgentEvents::StopReason::kError);
  } else if (phase == Phase::Waiting) {
    finish(1);
  }  // Stopping: afterStop() sees the error
}

void Agent::Impl::finish(int exit_code) {
  if (phase == Phase::Waiting || checking_failure) {
    rendezvous.cancelWait();  // a pending nextGroup() or failureStands() returns; run() joins it
  }
  phase = Phase::Done;
  result.exit_code = exit_code;
  events().finished(exit_code, Clock::now());
  net::error_code ignored;
  signals.cancel(ignored);
  grace.cancel();
  heartbeat_timer.cancel();
  watchdogs.stop();
  peers.reset();
  // What is stuck will not die in any wait; the rest was SIGKILLed with it.
  tree.finish(group.attempt, result.stuck.empty() ? std::chrono::milliseconds(kLeftoverWait)
                                                  : std::chrono::milliseconds(0));
  // Its workers are reaped (a stuck one is SIGKILLed already): its thread
  // ends meanwhile, not on the agent's way out.
  spawner.finish();
  relays.drain();
}

void Agent::Impl::joinWaiter() {
  if (waiter.joinable()) {
    waiter.join();
  }
}

// Each signal is one request, however many copies of it come within
// kOneRequest (the guardian's forwarded copy of a `kill -INT -<pgid>`, or of
// Slurm's signal to every process of the step); two Ctrl-C's further apart
// are two.
void Agent::Impl::waitForSignal() {
  signals.async_wait([this](const net::error_code& error, int signal) {
    if (error || phase == Phase::Done) {
      return;
    }
    const Clock::time_point now = Clock::now();
    // Per signal: a warning between a SIGTERM and its guardian copy must not
    // make that copy a second request (which kills the workers at once).
    const auto last = last_request_at.find(signal);
    if (last == last_request_at.end() || now - last->second >= kOneRequest) {
      last_request_at[signal] = now;
      if (std::find(forwarded_only.begin(), forwarded_only.end(), signal) != forwarded_only.end()) {
        forwardToWorkers(signal);
      } else if (!onStopRequest(signal)) {
        return;  // the run is over
      }
    }
    waitForSignal();
  });
}

// A warning for the workers (SIGUSR1: save a snapshot), not for the agent:
// passed on to the process group of each running worker whose main process
// has a handler for it (or ignores it), which keeps running. One that
// does not is not told: the signal's default action would end it, and a
// user's `kill -USR1` of ddprun would end the job (under Slurm such a
// worker gets Slurm's own copy anyway). Stopping workers are not told:
// they are ending anyway, by the stop signal.
void Agent::Impl::forwardToWorkers(int signal) {
  if (phase != Phase::Running) {
    log().info("received {}: not forwarded, {}", signalName(signal),
               phase == Phase::Waiting ? "no workers are running" : "the workers are stopping");
    return;
  }
  std::vector<int> told;
  std::vector<int> passed_by;
  for (Worker& worker : workers) {
    if (worker.exited) {
      continue;
    }
    if (!handlesSignal(worker.process.pid(), signal)) {
      passed_by.push_back(worker.local_rank);
    } else if (worker.process.signalGroup(signal)) {
      told.push_back(worker.local_rank);
    }
  }
  log().info("received {}: forwarded to local rank(s) [{}], which handle it and keep running{}",
             signalName(signal), fmt::join(told, ","),
             passed_by.empty() ? std::string()
                               : fmt::format("; not to [{}], which do not handle it (it would "
                                             "end them)",
                                             fmt::join(passed_by, ",")));
}

std::vector<int> forwardedOnlySignals(const std::vector<int>& signals_to_handle) {
  std::vector<int> forwarded;
  for (int signal : {SIGUSR1, SIGUSR2}) {
    if (std::find(signals_to_handle.begin(), signals_to_handle.end(), signal) ==
        signals_to_handle.end()) {
      forwarded.push_back(signal);
    }
  }
  return forwarded;
}

void ignoreForwardedOnlySignals(const std::vector<int>& signals_to_handle) {
  for (int signal : forwardedOnlySignals(signals_to_handle)) {
    std::signal(signal, SIG_IGN);
  }
}

// The first request stops the workers with the signal itself, as torchrun
// does; a later one, while they still stop, kills them at once. False once
// the run has ended.
bool Agent::Impl::onStopRequest(int signal) {
  if (result.signal != 0) {
    log().warn("received {} again: killing the workers now", signalName(signal));
    stop_killed = true;
    for (Worker& worker : workers) {
      if (!worker.exited) {
        worker.process.signalGroup(SIGKILL);
      }
    }
    return true;
  }
  result.signal = signal;
  restart_after_stop = false;
  log().warn("received {}: {}", signalName(signal),
             phase == Phase::Waiting ? "stopping (no workers are running)"
                                     : "forwarding it to the workers and stopping them (a "
                                       "second one kills them at once)");
  if (phase == Phase::Waiting) {
    finish(128 + signal);  // no workers yet: stop waiting
    return false;
  }
  stopGroup(signal, AgentEvents::StopReason::kSignal);  // forwarded as is, as torchrun does
  return true;
}

}  // namespace ddprun::launcher

// Processes stuck in the kernel: a running worker in uninterruptible sleep
// past TORCHELASTIC_UNINTERRUPTIBLE_STATE_TIMEOUT (torch 2.14's D-state
// check), a stopped worker still alive that long after its SIGKILL, and the
// same of what the workers left. SIGKILL takes effect only when a process
// leaves the kernel, so such a process waits on a device, a driver or a file
// system that does not answer (a wedged GPU, NIC or FUSE/NFS server), and no
// restart on this node can do better. torchrun abandons it and goes on;
// ddprun ends with kStuckWorkerExitCode and one line per process naming its
// state, wchan and kernel stack, so the scheduler replaces the node, and
// leaves the job as an unfit node does (docs/launcher.md, Workers stuck in
// the kernel). Runs on the agent's loop, as the rest of Agent::Impl.
#include <signal.h>
#include <sys/wait.h>

#include <algorithm>

#include "agent_impl.hpp"
#include "ddprun/launcher/core/log.hpp"
#include "ddprun/launcher/core/option_values.hpp"
#include "ddprun/launcher/supervision/kernel_wait.hpp"
#include "ddprun/proto/visible_text.hpp"

namespace ddprun::launcher {
namespace {

using std::chrono::milliseconds;

std::string joined(const std::vector<std::string>& argv) {
  std::string text;
  for (const std::string& argument : argv) {
    text += (text.empty() ? "" : " ") + argument;
  }
  return text.size() > 200 ? proto::visible(text.substr(0, 200)) + "..." : proto::visible(text);
}

// "local rank 0 (rank 4, pid 7, 'python -u train.py')": the command the agent
// ran, since an exiting process's /proc/<pid>/cmdline is empty.
std::string workerName(int local_rank, int rank, pid_t pid, const std::vector<std::string>& argv) {
  return "local rank " + std::to_string(local_rank) + " (rank " + std::to_string(rank) + ", pid " +
         std::to_string(pid) + ", '" + joined(argv) + "')";
}

// "<who> <what>: state D (...), wchan ..., kernel stack ...".
std::string stuckLine(pid_t pid, const std::string& who, const std::string& what) {
  return who + " " + what + ": " + describeKernelWait(readKernelWait(pid));
}

// Whether the child has exited, its exit still to be taken (WNOWAIT): one
// that died as the timer fell due has its exit queued on the loop.
bool hasExited(pid_t pid) {
  siginfo_t info{};
  return ::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
         info.si_pid == pid;
}

}  // namespace

// The variable when set: the user's measure of "stuck". Otherwise torch
// 2.14's bound after SIGKILL, the shutdown timeout, never under the wait
// for leftovers: a big process takes a while to die (a GPU context's
// teardown runs in the kernel, in D), and must not be called stuck for it.
milliseconds Agent::Impl::killWait() const {
  if (config.uninterruptible_timeout.count() > 0) {
    return config.uninterruptible_timeout;
  }
  return std::max<milliseconds>(config.shutdown_timeout, kLeftoverWait);
}

// torch forces its remaining restarts to 0 and stops the group; so does
// this, and the run ends with kStuckWorkerExitCode once the group is down.
bool Agent::Impl::onUninterruptible(std::size_t index, milliseconds in_d) {
  if (!runs(index)) {
    return false;
  }
  Worker& worker = workers[index];
  worker.stuck = true;
  const pid_t pid = worker.process.pid();
  result.stuck.push_back(stuckLine(
      pid, workerName(worker.local_rank, worker.rank, pid, config.command(worker.local_rank)),
      "has been in uninterruptible sleep for " + formatSeconds(in_d)));
  log().error(
      "local rank {} (pid {}) has been in uninterruptible sleep for {} "
      "(TORCHELASTIC_UNINTERRUPTIBLE_STATE_TIMEOUT): stopping the workers; no restart, this "
      "node ends with exit status {}",
      worker.local_rank, worker.process.pid(), formatSeconds(in_d), kStuckWorkerExitCode);
  restart_after_stop = false;
  stopGroup(SIGTERM, AgentEvents::StopReason::kFailure);
  return true;
}

// The grace is over and SIGKILL was sent killWait() ago: whoever still has
// not exited is stuck. Each is named (once), then every worker not taken
// yet is given up unreaped (its exit must not reach a finished agent).
void Agent::Impl::onKilledButAlive() {
  const bool any_stuck = std::any_of(workers.begin(), workers.end(), [](const Worker& worker) {
    return !worker.exited && !hasExited(worker.process.pid());
  });
  if (!any_stuck) {
    return;  // the last exits are on their way: afterStop() follows them
  }
  for (std::size_t index = 0; index < workers.size(); ++index) {
    Worker& worker = workers[index];
    if (worker.exited) {
      continue;
    }
    if (!worker.stuck && !hasExited(worker.process.pid())) {
      const pid_t pid = worker.process.pid();
      result.stuck.push_back(stuckLine(
          pid, workerName(worker.local_rank, worker.rank, pid, config.command(worker.local_rank)),
          "is still alive " + formatSeconds(killWait()) + " after SIGKILL"));
      worker.stuck = true;
    }
    abandon(index);
  }
  endStuck();
}

// killLeftovers() waited `waited` for them; they get the rest of killWait().
// Not reaped by then (the process tree reaps any that dies meanwhile), each
// is named and the run ends; else the stop goes on.
void Agent::Impl::awaitStuckLeftovers(std::vector<pid_t> still_alive, milliseconds waited) {
  grace.expires_after(killWait() - std::min(killWait(), waited));
  grace.async_wait([this, still_alive = std::move(still_alive)](const net::error_code& error) {
    if (error) {
      return;
    }
    for (pid_t pid : still_alive) {
      if (waitpid(pid, nullptr, WNOHANG) != 0) {
        continue;  // reaped now, or by the process tree already
      }
      const std::string who = "pid " + std::to_string(pid) + " ('" + commandLineOf(pid) +
                              "'), left by the workers of attempt " +
                              std::to_string(group.attempt) + ",";
      result.stuck.push_back(
          stuckLine(pid, who, "is still alive " + formatSeconds(killWait()) + " after SIGKILL"));
    }
    if (result.stuck.empty()) {
      afterLeftovers();
    } else {
      endStuck();
    }
  });
}

// Its exit will never be waited for: the watch on its pidfd goes, and the
// Subprocess gives the pid up unreaped (a blocking reap would hang the agent
// as the process hangs). Whoever reaps orphans reaps it, if it ever dies.
void Agent::Impl::abandon(std::size_t index) {
  Worker& worker = workers[index];
  worker.exit_watch.reset();
  worker.process.killAndAbandon();
  worker.exited = true;
  watchdogs.workerExited(index);
  --running;
}

// As an unfit node: no exit barrier, the job left to the others
// (RunResult::left_unfit); what else is left is killed, not waited for.
void Agent::Impl::endStuck() {
  result.left_unfit = true;
  restart_after_stop = false;
  finish(kStuckWorkerExitCode);
}

}  // namespace ddprun::launcher

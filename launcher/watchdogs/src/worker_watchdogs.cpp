#include "ddprun/launcher/watchdogs/worker_watchdogs.hpp"

#include <signal.h>
#include <string.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "ddprun/launcher/core/log.hpp"
#include "ddprun/launcher/supervision/procfs.hpp"
#include "ddprun/launcher/watchdogs/python_stacks.hpp"
#include "file_timer.hpp"
#include "hang_watch.hpp"
#include "hung_forensics.hpp"
#include "progress_watch.hpp"
#include "uninterruptible_watch.hpp"

namespace ddprun::launcher {
namespace {

std::string scopesOf(const ExpiredTimers& expired) {
  std::string text;
  for (const TimerRequest& timer : expired.timers) {
    text += (text.empty() ? "'" : ", '") + timer.scope_id + "'";
  }
  return text;
}

// How long a Python worker stopped with SIGABRT has to print its stacks and
// die before it is SIGKILLed: faulthandler writes them in milliseconds.
constexpr auto kAbortBound = std::chrono::seconds(2);

// Kept in the verdict when the other workers' stacks have no file: enough to
// see where each one was, not their every frame.
constexpr std::size_t kPeerStackShown = 16 * 1024;

std::string peerStacks(const std::vector<WorkerStacks>& stacks, std::size_t hung) {
  std::string text;
  for (const WorkerStacks& worker : stacks) {
    if (worker.index == hung) {
      continue;
    }
    text += "local rank " + std::to_string(worker.index) + " (pid " + std::to_string(worker.pid) +
            "): ";
    if (!worker.file.empty()) {
      text += "stacks in " + worker.file + "\n";
      continue;
    }
    text += "\n" + worker.text.substr(0, kPeerStackShown);
    if (worker.text.size() > kPeerStackShown) {
      text += "(cut at 16 KiB)\n";
    }
  }
  return text;
}

// A peer's answer: one line per local worker, where its stacks are.
std::string whereStacksAre(const std::vector<WorkerStacks>& stacks) {
  std::string text;
  for (const WorkerStacks& worker : stacks) {
    text += (text.empty() ? "" : "; ") + std::string("local rank ") + std::to_string(worker.index) +
            " (pid " + std::to_string(worker.pid) +
            "): " + (worker.file.empty() ? "stacks not saved (no log directory)" : worker.file);
  }
  return text.empty() ? "no worker running" : text;
}

}  // namespace

WorkerWatchdogs::WorkerWatchdogs(net::asio::io_context& io, Options options, Hooks hooks)
    : options_(std::move(options)), hooks_(std::move(hooks)), abort_deadline_(io) {
  if (!options_.timer_file.empty()) {
    file_timer_ = std::make_unique<FileTimer>(
        io, options_.timer_file,
        [this](const ExpiredTimers& expired) { onTimersExpired(expired); });
  }
  if (options_.hang_timeout.count() > 0) {
    hang_watch_ = std::make_unique<HangWatch>(
        io, options_.hang_timeout,
        [this](std::size_t index, pid_t pid) { return onHung(index, pid); });
  }
  // Always: without a timeout it still keeps each attempt's best step.
  progress_watch_ = std::make_unique<ProgressWatch>(
      io, options_.progress_timeout, [this](const ProgressWatch::Stalled& stalled) {
        return onStalled(stalled.index, stalled.pid,
                         "no progress for " + formatSeconds(stalled.silent) + " after step " +
                             std::to_string(stalled.step) + (stalled.busy ? ", its CPU busy" : "") +
                             " (progress timeout " + stalled.timeout_text + ")");
      });
  if (options_.uninterruptible_timeout.count() > 0) {
    uninterruptible_watch_ = std::make_unique<UninterruptibleWatch>(
        io, options_.uninterruptible_timeout,
        [this](std::size_t index, pid_t /*pid*/, std::chrono::milliseconds in_d) {
          return hooks_.stuck && hooks_.stuck(index, in_d);
        });
  }
  forensics_ = std::make_unique<HungForensics>(io, options_.path_variable);
}

WorkerWatchdogs::~WorkerWatchdogs() = default;

void WorkerWatchdogs::attemptStarted() {
  running_.clear();
  if (file_timer_) {
    file_timer_->clear();
  }
  if (hang_watch_) {
    hang_watch_->clear();
  }
  progress_watch_->clear();
  if (uninterruptible_watch_) {
    uninterruptible_watch_->clear();
  }
  forensics_->cancel();
  abort_deadline_.cancel();
  hang_.reset();
  peer_hang_ = false;
  ++generation_;
}

void WorkerWatchdogs::workerStarted(std::size_t index, pid_t pid, const std::string& error_file,
                                    const std::string& progress_file, bool faulthandler) {
  running_[index] = {pid, error_file, faulthandler};
  if (hang_watch_) {
    hang_watch_->watch(index, pid);
  }
  if (!progress_file.empty()) {
    progress_watch_->watch(index, pid, progress_file);
  }
  if (uninterruptible_watch_) {
    uninterruptible_watch_->watch(index, pid);
  }
}

std::function<void()> WorkerWatchdogs::outputObserver(std::size_t index) {
  if (!hang_watch_) {
    return {};
  }
  return [this, index] { hang_watch_->outputSeen(index); };
}

void WorkerWatchdogs::workerExited(std::size_t index) {
  running_.erase(index);
  if (hang_watch_) {
    hang_watch_->forget(index);
  }
  progress_watch_->forget(index);
  if (uninterruptible_watch_) {
    uninterruptible_watch_->forget(index);
  }
}

std::optional<std::int64_t> WorkerWatchdogs::bestStep() { return progress_watch_->bestStep(); }

std::optional<std::int64_t> WorkerWatchdogs::bestSnapshot() {
  return progress_watch_->bestSnapshot();
}

void WorkerWatchdogs::stop() {
  if (file_timer_) {
    file_timer_->stop();
  }
  if (hang_watch_) {
    hang_watch_->stop();
  }
  progress_watch_->stop();
  if (uninterruptible_watch_) {
    uninterruptible_watch_->stop();
  }
  forensics_->cancel();
  abort_deadline_.cancel();
  hang_.reset();
  peer_hang_ = false;
  ++generation_;
}

void WorkerWatchdogs::captureForPeer(const Answer& answer) {
  peer_hang_ = true;
  std::vector<HungForensics::Target> targets;
  for (const auto& [worker_index, worker] : running_) {
    targets.push_back({worker_index, worker.pid, worker.error_file});
  }
  if (hang_ ||
      !forensics_->capture(std::move(targets), [answer](const std::vector<WorkerStacks>& stacks) {
        answer(whereStacksAre(stacks));
      })) {
    answer("busy with a hang of its own (its stacks are in its attempt directories)");
  }
}

// torch signals whatever pid the request names; ddprun only its own workers
// and what belongs to them.
void WorkerWatchdogs::onTimersExpired(const ExpiredTimers& expired) {
  const auto owner = std::find_if(running_.begin(), running_.end(), [&](const auto& entry) {
    return belongsTo(expired.pid, entry.second.pid);
  });
  if (owner == running_.end() && !readProcStat(expired.pid)) {
    log().info("file timer: scope {} of pid {} expired after the process ended; nothing to do",
               scopesOf(expired), expired.pid);
    return;
  }
  if (owner == running_.end()) {
    log().warn(
        "file timer: scope {} of pid {} expired, but pid {} is not one of this agent's "
        "workers nor belongs to one: not signalled",
        scopesOf(expired), expired.pid, expired.pid);
    return;
  }
  const auto [index, worker] = *owner;
  const TimerRequest* reaping = expired.reaping();
  if (reaping == nullptr) {
    log().info(
        "file timer: scope {} of local rank {} (pid {}) expired with no signal to send; "
        "left alone, as torch does",
        scopesOf(expired), index, expired.pid);
    return;
  }
  std::string sent = signalName(reaping->signal) + " sent";
  if (expired.pid != worker.pid) {
    sent += " to pid " + std::to_string(expired.pid) + " of its process tree";
  }
  if (!hooks_.runs(index)) {
    return;
  }
  log().warn(
      "file timer: scope '{}' of local rank {} (pid {}) expired; capturing every local "
      "worker's stacks, then sending {}",
      reaping->scope_id, index, expired.pid, signalName(reaping->signal));
  const pid_t target = expired.pid;
  const int signal = reaping->signal;
  const std::string reason =
      "timed out in scope '" + reaping->scope_id + "' (file timer; " + sent + ")";
  if (!captureThenKill(index, worker.pid, reason, [target, signal] { ::kill(target, signal); })) {
    log().warn("file timer: stacks are being captured already; sending {} now", signalName(signal));
    WorkerVerdict verdict;
    verdict.reason = reason;
    if (hooks_.condemn(index, verdict)) {
      ::kill(target, signal);
    }
  }
}

// False: not now (the group is stopping, or stacks are being captured); the
// watch will look at it again.
bool WorkerWatchdogs::onHung(std::size_t index, pid_t pid) {
  if (peer_hang_) {
    return true;  // another node judged the group's hang first
  }
  if (!hooks_.runs(index) || forensics_->busy() || hang_) {
    return false;
  }
  log().warn(
      "local rank {} (pid {}) is hung: no output and no CPU time for {}; capturing every local "
      "worker's stacks, then killing it",
      index, pid, formatSeconds(hang_watch_->timeout()));
  return captureThenKill(
      index, pid, "hung: no output and no CPU time for " + formatSeconds(hang_watch_->timeout()),
      [this, index, pid] { killHung(index, pid); });
}

bool WorkerWatchdogs::onStalled(std::size_t index, pid_t pid, const std::string& reason) {
  if (peer_hang_) {
    return true;  // another node judged the group's hang first
  }
  if (!hooks_.runs(index) || forensics_->busy() || hang_) {
    return false;
  }
  log().warn(
      "local rank {} (pid {}) is hung: {}; capturing every local worker's stacks, then "
      "killing it",
      index, pid, reason);
  return captureThenKill(index, pid, "hung: " + reason,
                         [this, index, pid] { killHung(index, pid); });
}

void WorkerWatchdogs::killHung(std::size_t index, pid_t pid) {
  const auto found = running_.find(index);
  if (found != running_.end() && found->second.faulthandler && abortForPythonStacks(pid)) {
    // A handler of the user's, or a thread in the kernel, may keep it from
    // dying: it gets what any other hung worker gets a moment later.
    abort_deadline_.expires_after(kAbortBound);
    abort_deadline_.async_wait([this, index, pid](const net::error_code& error) {
      const auto still = running_.find(index);
      if (!error && still != running_.end() && still->second.pid == pid) {
        ::killpg(pid, SIGKILL);
        ::kill(pid, SIGKILL);
      }
    });
    return;
  }
  ::killpg(pid, SIGKILL);  // the worker leads its group; its pid is not reaped yet
  ::kill(pid, SIGKILL);    // in case it left its group
}

bool WorkerWatchdogs::captureThenKill(std::size_t index, pid_t pid, std::string reason, Kill kill) {
  if (hang_) {
    return false;
  }
  std::vector<HungForensics::Target> targets;
  for (const auto& [worker_index, worker] : running_) {
    targets.push_back({worker_index, worker.pid, worker.error_file});
  }
  auto round = std::make_shared<HangRound>();
  round->generation = generation_;
  round->index = index;
  round->pid = pid;
  round->reason = std::move(reason);
  round->kill = std::move(kill);
  if (!forensics_->capture(std::move(targets), [this, round](std::vector<WorkerStacks> stacks) {
        round->stacks = std::move(stacks);
        roundPartDone(round);
      })) {
    return false;
  }
  hang_ = round;
  if (!hooks_.ask_peers) {
    roundPartDone(round);
    return true;
  }
  hooks_.ask_peers(index, round->reason, [this, round](std::string answers) {
    round->peer_answers = std::move(answers);
    roundPartDone(round);
  });
  return true;
}

void WorkerWatchdogs::roundPartDone(const std::shared_ptr<HangRound>& round) {
  if (--round->pending > 0 || round->generation != generation_ || hang_ != round) {
    return;
  }
  hang_.reset();
  onStacks(*round);
}

void WorkerWatchdogs::onStacks(HangRound& round) {
  const auto found = running_.find(round.index);
  if (found == running_.end() || found->second.pid != round.pid) {
    return;  // it exited meanwhile
  }
  WorkerVerdict verdict;
  verdict.reason = std::move(round.reason) + " (stack below)";
  for (WorkerStacks& worker : round.stacks) {
    if (worker.index == round.index) {
      verdict.stack = std::move(worker.text);
      verdict.stack_file = worker.file;
    }
  }
  verdict.peer_stacks = peerStacks(round.stacks, round.index) + round.peer_answers;
  if (!hooks_.condemn(round.index, verdict)) {
    return;
  }
  round.kill();
}

}  // namespace ddprun::launcher

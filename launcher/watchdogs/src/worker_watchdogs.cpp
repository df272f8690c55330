#include "ddprun/launcher/watchdogs/worker_watchdogs.hpp"

#include <signal.h>
#include <string.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "ddprun/launcher/core/log.hpp"
#include "ddprun/launcher/supervision/procfs.hpp"
#include "file_timer.hpp"
#include "hang_watch.hpp"
#include "stack_capture.hpp"

namespace ddprun::launcher {
namespace {

std::string scopesOf(const ExpiredTimers& expired) {
  std::string text;
  for (const TimerRequest& timer : expired.timers) {
    text += (text.empty() ? "'" : ", '") + timer.scope_id + "'";
  }
  return text;
}

}  // namespace

std::string formatSeconds(std::chrono::milliseconds duration) {
  const long long ms = duration.count();
  if (ms % 1000 == 0) {
    return std::to_string(ms / 1000) + " s";
  }
  char text[32];
  std::snprintf(text, sizeof text, "%.3g s", static_cast<double>(ms) / 1000.0);
  return text;
}

WorkerWatchdogs::WorkerWatchdogs(net::asio::io_context& io, Options options, Hooks hooks)
    : options_(std::move(options)), hooks_(std::move(hooks)) {
  if (!options_.timer_file.empty()) {
    file_timer_ = std::make_unique<FileTimer>(
        io, options_.timer_file,
        [this](const ExpiredTimers& expired) { onTimersExpired(expired); });
  }
  if (options_.hang_timeout.count() > 0) {
    hang_watch_ = std::make_unique<HangWatch>(
        io, options_.hang_timeout,
        [this](std::size_t index, pid_t pid) { return onHung(index, pid); });
    stacks_ = std::make_unique<StackCapture>(io, options_.path_variable);
  }
}

WorkerWatchdogs::~WorkerWatchdogs() = default;

void WorkerWatchdogs::attemptStarted() {
  running_.clear();
  if (file_timer_) {
    file_timer_->clear();
  }
  if (hang_watch_) {
    hang_watch_->clear();
    stacks_->cancel();
  }
}

void WorkerWatchdogs::workerStarted(std::size_t index, pid_t pid, const std::string& error_file) {
  if (!file_timer_ && !hang_watch_) {
    return;
  }
  running_[index] = {pid, error_file};
  if (hang_watch_) {
    hang_watch_->watch(index, pid);
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
}

void WorkerWatchdogs::stop() {
  if (file_timer_) {
    file_timer_->stop();
  }
  if (hang_watch_) {
    hang_watch_->stop();
    stacks_->cancel();
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
  WorkerVerdict verdict;
  verdict.reason = "timed out in scope '" + reaping->scope_id + "' (file timer; " + sent + ")";
  if (!hooks_.condemn(index, verdict)) {
    return;
  }
  log().warn("file timer: scope '{}' of local rank {} (pid {}) expired; sending {}",
             reaping->scope_id, index, expired.pid, signalName(reaping->signal));
  ::kill(expired.pid, reaping->signal);
}

// False: not now (the group is stopping, or another capture runs); the hang
// watch will look at it again.
bool WorkerWatchdogs::onHung(std::size_t index, pid_t pid) {
  if (!hooks_.runs(index) || stacks_->busy()) {
    return false;
  }
  log().warn(
      "local rank {} (pid {}) is hung: no output and no CPU time for {}; capturing its "
      "stack, then killing it",
      index, pid, formatSeconds(hang_watch_->timeout()));
  return stacks_->capture(
      pid, [this, index, pid](std::string stacks) { onStack(index, pid, std::move(stacks)); });
}

void WorkerWatchdogs::onStack(std::size_t index, pid_t pid, std::string stacks) {
  const auto found = running_.find(index);
  if (found == running_.end() || found->second.pid != pid) {
    return;  // it exited meanwhile
  }
  WorkerVerdict verdict;
  verdict.reason = "hung: no output and no CPU time for " + formatSeconds(hang_watch_->timeout()) +
                   " (stack below)";
  verdict.stack = std::move(stacks);
  const std::string& error_file = found->second.error_file;
  if (!error_file.empty()) {
    verdict.stack_file = (std::filesystem::path(error_file).parent_path() / "stack.txt").string();
  }
  if (!hooks_.condemn(index, verdict)) {
    return;
  }
  if (!verdict.stack_file.empty()) {
    std::ofstream(verdict.stack_file) << verdict.stack;
  }
  ::killpg(pid, SIGKILL);  // the worker leads its group; its pid is not reaped yet
  ::kill(pid, SIGKILL);    // in case it left its group
}

}  // namespace ddprun::launcher

// FakeRendezvous: a scripted Rendezvous for the agent's tests. In automatic
// mode every nextGroup() returns the base group with the next attempt number
// (as --standalone does); otherwise nextGroup() blocks until the test pushes
// a group, an error or the end of the job, or the agent cancels the wait.
// Records what the agent asked of it. Any thread may call any member.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "ddprun/launcher/core/rendezvous.hpp"
#include "ddprun/proto/errors.hpp"

namespace ddprun::launcher::testing {

class FakeRendezvous : public Rendezvous {
 public:
  // Scripted; or, given `automatic`, attempt 0, 1, 2, ... of it, at once.
  explicit FakeRendezvous(std::optional<WorkerGroup> automatic = std::nullopt)
      : automatic_(std::move(automatic)) {}

  std::string describe() const override { return "fake rendezvous"; }

  std::optional<WorkerGroup> nextGroup() override {
    std::unique_lock lock(mutex_);
    ++calls_;
    changed_.notify_all();
    if (automatic_) {
      WorkerGroup group = *automatic_;
      group.attempt = handed_out_++;
      return group;
    }
    changed_.wait(lock, [this] { return cancelled_ || !script_.empty(); });
    if (cancelled_) {
      return std::nullopt;
    }
    const Step step = script_.front();
    script_.pop_front();
    if (const auto* error = std::get_if<std::string>(&step)) {
      throw Error(*error);
    }
    return std::get<std::optional<WorkerGroup>>(step);
  }

  void cancelWait() override {
    std::lock_guard lock(mutex_);
    cancelled_ = true;
    changed_.notify_all();
  }

  void watchGroup(std::function<void(int)> over) override {
    std::lock_guard lock(watch_mutex_);
    over_ = std::move(over);
  }

  void requestRestart(const WorkerFailure& cause) override {
    std::lock_guard lock(mutex_);
    ++restart_requests_;
    restart_causes_.push_back(cause);
  }

  bool failureStands(int attempt, bool restart_asked) override {
    std::lock_guard lock(mutex_);
    failure_checks_.push_back(attempt);
    restart_checks_.push_back(restart_asked);
    return failure_stands_;
  }

  int finishJob(const RunResult& result) override { return result.exit_code; }

  // What failureStands() answers: false models a group the rendezvous knew
  // was over before it could say so to the agent.
  void setFailureStands(bool stands) {
    std::lock_guard lock(mutex_);
    failure_stands_ = stands;
  }
  // The attempts whose failure the agent put to failureStands().
  std::vector<int> failureChecks() {
    std::lock_guard lock(mutex_);
    return failure_checks_;
  }
  // For each of those, whether the agent had asked for a restart.
  std::vector<bool> restartChecks() {
    std::lock_guard lock(mutex_);
    return restart_checks_;
  }

  // The script: the next nextGroup() returns `group`, ends the job
  // (nullopt), or throws Error(message).
  void push(WorkerGroup group) { add(std::optional<WorkerGroup>(group)); }
  void endJob() { add(std::optional<WorkerGroup>()); }
  void fail(std::string message) { add(std::move(message)); }

  // The membership changed: the running group is over, `newer` is next.
  void declareOver(int newer) {
    std::lock_guard lock(watch_mutex_);
    if (over_) {
      over_(newer);
    }
  }

  // Blocks until the agent has called nextGroup() `calls` times.
  bool waitForCalls(int calls, std::chrono::milliseconds timeout) {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, timeout, [&] { return calls_ >= calls; });
  }
  int calls() {
    std::lock_guard lock(mutex_);
    return calls_;
  }
  int restartRequests() {
    std::lock_guard lock(mutex_);
    return restart_requests_;
  }
  // The failure each restart request named, in order.
  std::vector<WorkerFailure> restartCauses() {
    std::lock_guard lock(mutex_);
    return restart_causes_;
  }
  bool cancelled() {
    std::lock_guard lock(mutex_);
    return cancelled_;
  }

 private:
  using Step = std::variant<std::optional<WorkerGroup>, std::string>;

  void add(Step step) {
    std::lock_guard lock(mutex_);
    script_.push_back(std::move(step));
    changed_.notify_all();
  }

  std::optional<WorkerGroup> automatic_;
  int handed_out_ = 0;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Step> script_;
  int calls_ = 0;
  int restart_requests_ = 0;
  std::vector<WorkerFailure> restart_causes_;
  bool cancelled_ = false;
  bool failure_stands_ = true;
  std::vector<int> failure_checks_;
  std::vector<bool> restart_checks_;
  std::mutex watch_mutex_;
  std::function<void(int)> over_;
};

}  // namespace ddprun::launcher::testing

#include "ddprun/launcher/process/parallel_spawn.hpp"

#include <signal.h>

#include <system_error>

namespace ddprun::launcher {

ParallelSpawn::~ParallelSpawn() {
  finish();
  if (thread_.joinable()) {
    thread_.join();
  }
}

void ParallelSpawn::finish() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
}

std::vector<SpawnOutcome> ParallelSpawn::startAll(const std::vector<SpawnOptions>& group) {
  std::vector<SpawnOutcome> outcomes(group.size());
  if (group.size() < 2 || stopping_ || !haveThread()) {
    startEvery(0, 1, group, outcomes);
    return outcomes;
  }
  {
    std::lock_guard lock(mutex_);
    group_ = &group;
    outcomes_ = &outcomes;
  }
  changed_.notify_all();
  startEvery(0, 2, group, outcomes);  // the even members; the thread starts the odd ones
  awaitThread();
  return outcomes;
}

// noexcept: the thread writes into the caller's vectors until it is done.
void ParallelSpawn::awaitThread() noexcept {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [this] { return group_ == nullptr; });
}

bool ParallelSpawn::haveThread() {
  if (!thread_.joinable()) {
    // Made with every signal blocked, which it keeps: signals are the
    // agent's loop's to take, and a child sets its own mask.
    sigset_t all;
    sigset_t before;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &before);
    try {
      thread_ = std::thread([this] { serve(); });
    } catch (const std::system_error&) {
      pthread_sigmask(SIG_SETMASK, &before, nullptr);
      return false;  // out of threads: one after the other, as before
    }
    pthread_sigmask(SIG_SETMASK, &before, nullptr);
  }
  return true;
}

// Members first, first + step, ...
void ParallelSpawn::startEvery(std::size_t first, std::size_t step,
                               const std::vector<SpawnOptions>& group,
                               std::vector<SpawnOutcome>& outcomes) {
  for (std::size_t i = first; i < group.size(); i += step) {
    try {
      outcomes[i].process.emplace(group[i]);
      outcomes[i].started_at = std::chrono::steady_clock::now();
    } catch (...) {
      outcomes[i].error = std::current_exception();
    }
  }
}

void ParallelSpawn::serve() {
  std::unique_lock lock(mutex_);
  for (;;) {
    changed_.wait(lock, [this] { return stopping_ || group_ != nullptr; });
    if (stopping_) {
      return;
    }
    const std::vector<SpawnOptions>& group = *group_;
    std::vector<SpawnOutcome>& outcomes = *outcomes_;
    lock.unlock();
    startEvery(1, 2, group, outcomes);
    lock.lock();
    group_ = nullptr;
    outcomes_ = nullptr;
    changed_.notify_all();
  }
}

}  // namespace ddprun::launcher

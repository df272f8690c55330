#include "ddprun/worker/snapshot_signal.hpp"

#include <pthread.h>
#include <signal.h>

#include <chrono>

namespace ddprun::worker {
namespace {

// Slurm's copy and ddprun's arrive milliseconds apart; a second warning a
// user sends on purpose comes later than this.
constexpr auto kOneRequest = std::chrono::seconds(1);

sigset_t onlyUsr1() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGUSR1);
  return set;
}

}  // namespace

SnapshotSignal::SnapshotSignal() {
  const sigset_t usr1 = onlyUsr1();
  pthread_sigmask(SIG_BLOCK, &usr1, nullptr);
  waiter_ = std::thread([this] { waitForSignals(); });
}

SnapshotSignal::~SnapshotSignal() {
  stopping_ = true;
  pthread_kill(waiter_.native_handle(), SIGUSR1);
  waiter_.join();
}

void SnapshotSignal::answered() {
  last_request_ = std::chrono::steady_clock::now().time_since_epoch().count();
  requested_ = false;
}

void SnapshotSignal::waitForSignals() {
  const sigset_t usr1 = onlyUsr1();
  using Clock = std::chrono::steady_clock;
  last_request_ = (Clock::now() - kOneRequest).time_since_epoch().count();
  for (;;) {
    if (sigwaitinfo(&usr1, nullptr) != SIGUSR1) {
      continue;  // EINTR
    }
    if (stopping_) {
      return;
    }
    const Clock::time_point now = Clock::now();
    const Clock::time_point last{Clock::duration(last_request_.load())};
    if (now - last >= kOneRequest) {
      last_request_ = now.time_since_epoch().count();
      requested_ = true;
    }
  }
}

}  // namespace ddprun::worker

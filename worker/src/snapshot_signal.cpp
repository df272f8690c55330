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

// The instance a handler run reaches (one per process).
std::atomic<SnapshotSignal*> g_instance{nullptr};

// Runs only in a thread that does not block SIGUSR1 (one started before the
// SnapshotSignal): a request all the same. Its presence also shows in
// /proc/<pid>/status (SigCgt), where ddprun looks before it forwards the
// signal: a worker without a handler would die of it.
void onUsr1(int /*signal*/) {
  if (SnapshotSignal* instance = g_instance.load()) {
    instance->requestFromHandler();
  }
}

}  // namespace

SnapshotSignal::SnapshotSignal() {
  const sigset_t usr1 = onlyUsr1();
  pthread_sigmask(SIG_BLOCK, &usr1, nullptr);
  g_instance = this;
  struct sigaction action {};
  action.sa_handler = onUsr1;
  action.sa_flags = SA_RESTART;
  sigemptyset(&action.sa_mask);
  sigaction(SIGUSR1, &action, &previous_);
  waiter_ = std::thread([this] { waitForSignals(); });
}

SnapshotSignal::~SnapshotSignal() {
  stopping_ = true;
  pthread_kill(waiter_.native_handle(), SIGUSR1);
  waiter_.join();
  sigaction(SIGUSR1, &previous_, nullptr);
  g_instance = nullptr;
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

#include "watchdog.hpp"

#include <condition_variable>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <thread>

namespace ddprun::bench {

struct Watchdog::State {
  std::mutex mutex;
  std::condition_variable cv;
  bool done = false;
  std::thread thread;
};

Watchdog::Watchdog(std::string what, std::chrono::milliseconds timeout)
    : state_(std::make_unique<State>()) {
  state_->thread = std::thread([state = state_.get(), what = std::move(what), timeout] {
    std::unique_lock lock(state->mutex);
    if (state->cv.wait_for(lock, timeout, [state] { return state->done; })) {
      return;
    }
    std::cerr << "store_bench: " << what << " did not finish within " << timeout.count()
              << " ms; killing the servers and giving up\n";
    // The servers are Subprocesses with a parent-death signal: the kernel
    // kills them as this process exits.
    std::_Exit(3);
  });
}

Watchdog::~Watchdog() {
  {
    std::lock_guard lock(state_->mutex);
    state_->done = true;
  }
  state_->cv.notify_all();
  state_->thread.join();
}

}  // namespace ddprun::bench

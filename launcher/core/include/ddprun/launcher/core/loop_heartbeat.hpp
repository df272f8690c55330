// Whether the agent's loop turns, for /healthz: torchrun's health check port
// is meant to say the agent is alive, and an agent whose loop has stopped
// turning (stuck in a call that never returns) is not, though its process
// and its metrics thread still are. The agent's loop beats about once a
// second while Agent::run() runs; before and after (start-up, the exit
// barrier) there is no loop to judge, and the agent counts as alive.
//
// Owns one atomic time. beat() and stop() come from the agent's loop thread,
// stalled() from any (the metrics endpoint's).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>

namespace ddprun::launcher {

class LoopHeartbeat {
 public:
  using Clock = std::chrono::steady_clock;

  // How long the loop may go without a beat before /healthz says it is stuck.
  static constexpr std::chrono::seconds kStallBound{10};

  void beat(Clock::time_point now = Clock::now()) {
    last_ns_.store(now.time_since_epoch().count(), std::memory_order_relaxed);
  }
  // The loop has ended: nothing to judge any more.
  void stop() { last_ns_.store(kNotRunning, std::memory_order_relaxed); }

  // Why the agent is not alive ("the agent's loop has not turned for 12 s"),
  // or "" while it turns or does not run.
  std::string stalled(Clock::time_point now = Clock::now()) const;

 private:
  static constexpr std::int64_t kNotRunning = INT64_MIN;
  std::atomic<std::int64_t> last_ns_{kNotRunning};
};

}  // namespace ddprun::launcher

#include "ddprun/launcher/core/loop_heartbeat.hpp"

namespace ddprun::launcher {

std::string LoopHeartbeat::stalled(Clock::time_point now) const {
  const std::int64_t last = last_ns_.load(std::memory_order_relaxed);
  if (last == kNotRunning) {
    return "";
  }
  const auto silent = now - Clock::time_point(Clock::duration(last));
  if (silent <= kStallBound) {
    return "";
  }
  return "the agent's loop has not turned for " +
         std::to_string(std::chrono::duration_cast<std::chrono::seconds>(silent).count()) + " s";
}

}  // namespace ddprun::launcher

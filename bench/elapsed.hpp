// Milliseconds on the steady clock, as every benchmark's tables give them.
// Stateless; any thread.
#pragma once

#include <chrono>

namespace ddprun::bench {

inline double millisBetween(std::chrono::steady_clock::time_point from,
                            std::chrono::steady_clock::time_point to) {
  return std::chrono::duration<double, std::milli>(to - from).count();
}

inline double msSince(std::chrono::steady_clock::time_point start) {
  return millisBetween(start, std::chrono::steady_clock::now());
}

}  // namespace ddprun::bench

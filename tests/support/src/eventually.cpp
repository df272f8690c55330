#include "ddprun/test_support/eventually.hpp"

#include <thread>

namespace ddprun::test_support {

bool eventually(const std::function<bool()>& predicate, std::chrono::milliseconds timeout,
                std::chrono::milliseconds interval) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (predicate()) {
      return true;
    }
    std::this_thread::sleep_for(interval);
  }
  // One last look, so a condition that became true during the final sleep
  // is not reported as a timeout.
  return predicate();
}

}  // namespace ddprun::test_support

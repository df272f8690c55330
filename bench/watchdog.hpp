// A last-resort guard for store_bench: if a phase overruns its deadline, say
// so, and exit with status 3, so the benchmark never hangs. Owns one thread
// that sleeps until the deadline or the destructor, whichever comes first.
#pragma once

#include <chrono>
#include <memory>
#include <string>

namespace ddprun::bench {

class Watchdog {
 public:
  Watchdog(std::string what, std::chrono::milliseconds timeout);
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace ddprun::bench

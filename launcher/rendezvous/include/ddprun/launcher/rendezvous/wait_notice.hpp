// Says what a blocking wait of the agent waits for, so no agent ever waits in
// silence: as soon as the wait has lasted a moment (kFirstNotice: waits that
// end sooner, the usual case, stay quiet), then every `period`, each time
// with the time left ("waiting for node rank(s) 1 of 2 to join the store at
// host0:29603 (895 s left)"). The waiting loop blocks in slices of at most
// next() and calls tick() between them. Used by one thread, the one that
// waits.
#pragma once

#include <chrono>
#include <functional>
#include <string>

namespace ddprun::launcher {

class WaitNotice {
 public:
  using Clock = std::chrono::steady_clock;
  using Duration = std::chrono::milliseconds;

  static constexpr Duration kFirstNotice{200};

  // `what` is asked for the text each time, so it can say what is still
  // missing; an empty text means nothing is (the wait is about to end).
  WaitNotice(std::function<std::string()> what, Clock::time_point deadline,
             Duration period = std::chrono::seconds(5));

  // Logs the notice if one is due.
  void tick();
  // What the last attempt ran into, said with the next notices.
  void setDetail(std::string detail) { detail_ = std::move(detail); }
  // How long the caller may block before calling tick() again: until the next
  // notice or the deadline, whichever is first; at least 1 ms.
  Duration next() const;
  bool expired() const { return Clock::now() >= deadline_; }
  Clock::time_point deadline() const { return deadline_; }

 private:
  std::function<std::string()> what_;
  Clock::time_point deadline_;
  Duration period_;
  Clock::time_point next_notice_;
  std::string detail_;
};

// "12 s" or "1.5 s": a duration as a person reads it.
std::string describeSeconds(std::chrono::milliseconds duration);

}  // namespace ddprun::launcher

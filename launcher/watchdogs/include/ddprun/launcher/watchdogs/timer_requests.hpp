// torch's file-timer requests and the bookkeeping of its FileTimerServer
// (torch/distributed/elastic/timer/file_based_local_timer.py), without I/O or
// clocks: the part of ddprun's file timer (file_timer.hpp) that tests can
// drive line by line. docs/torchrun-contract.md §7.6.
//
// A FileTimerClient writes one JSON object per request, then a newline:
//   {"version": 1, "pid": 4242, "scope_id": "train.py#12",
//    "expiration_time": 1700000000.25, "signal": 9}
// expiration_time is wall-clock seconds (time.time()); a negative one
// releases the timer of (pid, scope_id). Plain values; one thread.
#pragma once

#include <sys/types.h>

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace ddprun::launcher {

struct TimerRequest {
  pid_t pid = 0;
  std::string scope_id;
  double expiration_time = -1;  // wall-clock seconds; negative: release
  int signal = 0;               // what to send on expiry; <= 0: send nothing
  bool release() const { return expiration_time < 0; }
  bool operator==(const TimerRequest&) const = default;
};

// One line (without its newline) as a request, or why it is not one. torch
// reads "pid", "scope_id", "expiration_time" and "signal" and ignores
// "version"; ddprun also wants them typed: an integer pid > 0 (a pid of 0 or
// below would name a process group), a string scope, a number, an integer.
std::variant<TimerRequest, std::string> parseTimerRequest(std::string_view line);

// The timers of one pid that have expired, earliest first.
struct ExpiredTimers {
  pid_t pid = 0;
  std::vector<TimerRequest> timers;
  // The timer whose signal reaps the pid, as torch picks it: the earliest
  // with a signal > 0; nullptr when none has one (the pid is left alone).
  const TimerRequest* reaping() const;
};

// The live timers, one per (pid, scope): a request sets or replaces its
// timer, a release removes it.
class TimerTable {
 public:
  void apply(const TimerRequest& request);
  // The pids with a timer expired at `now` (expiration_time <= now), in pid
  // order. Every timer of those pids is then forgotten, expired or not, as
  // torch clears the timers of each pid it reaped.
  std::vector<ExpiredTimers> takeExpired(double now);
  // The earliest expiration, if any timer is set.
  std::optional<double> nextExpiration() const;
  void clear() { timers_.clear(); }
  std::size_t size() const { return timers_.size(); }

 private:
  std::map<std::pair<pid_t, std::string>, TimerRequest> timers_;
};

}  // namespace ddprun::launcher

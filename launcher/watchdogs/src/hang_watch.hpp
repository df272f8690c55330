// --worker-hang-timeout: notices workers that have written no output and
// used (almost) no CPU time for that long (docs/torchrun-contract.md §7.6).
//
// "No output": no byte on the worker's stdout or stderr; the output relays
// report every chunk through outputSeen(). "No CPU time": the worker and its
// descendants (DataLoader workers, a wrapper's children; through
// /proc/<pid>/task/*/children), with the CPU time they reaped, used less than
// 1% of one CPU over the whole timeout: a process blocked in a collective, a
// lock or a sleep uses none, and threads that wake now and then to look at a
// clock stay under it. A worker that spins is busy by this measure and is not
// hung.
//
// Runs on the agent's io_context: one steady timer ticks every quarter of the
// timeout (at least 0.1 s, at most 5 s) while workers are watched, and each
// tick reads /proc/<pid>/stat of each watched worker's tree; nothing runs
// when the flag is off (the agent creates no HangWatch). When workers are
// hung, `on_hung` is called for the one that has been quiet the longest (the
// others are usually waiting on it); once it takes the hang, that worker is
// not reported again.
#pragma once

#include <sys/types.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>

#include "ddprun/net/asio.hpp"
#include "repeating_timer.hpp"

namespace ddprun::launcher {

class HangWatch {
 public:
  using Clock = std::chrono::steady_clock;
  // Returns whether the hang was taken care of; if not, the worker is
  // looked at again on the next tick.
  using OnHung = std::function<bool(std::size_t index, pid_t pid)>;

  HangWatch(net::asio::io_context& io, std::chrono::milliseconds timeout, OnHung on_hung);

  std::chrono::milliseconds timeout() const { return timeout_; }
  std::chrono::milliseconds period() const { return period_; }

  // A worker started; it is watched from now on.
  void watch(std::size_t index, pid_t pid);
  // Output from the worker at `index` (any bytes).
  void outputSeen(std::size_t index);
  // The worker exited: no longer watched.
  void forget(std::size_t index);
  // Nothing is watched (a new attempt); the timer stops until watch().
  void clear();
  // Final: the timer stops, so the loop can end.
  void stop();

 private:
  struct Sample {
    Clock::time_point time;
    std::uint64_t ticks;
  };
  struct Watched {
    pid_t pid = 0;
    Clock::time_point last_output;
    Clock::time_point last_cpu;  // when its CPU time last grew, as seen by a tick
    std::deque<Sample> samples;  // covering at least the last timeout
    bool reported = false;
  };

  void arm();
  void tick();
  // True when `worker` has been quiet for the whole timeout at `now`.
  bool quiet(Watched& worker, Clock::time_point now);
  static Clock::time_point lastActive(const Watched& worker) {
    return std::max(worker.last_output, worker.last_cpu);
  }

  std::chrono::milliseconds timeout_;
  std::chrono::milliseconds period_;
  std::uint64_t allowance_ticks_;  // 1% of one CPU over the timeout
  OnHung on_hung_;
  RepeatingTimer timer_;
  std::map<std::size_t, Watched> watched_;
  bool stopped_ = false;
};

}  // namespace ddprun::launcher

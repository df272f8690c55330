// --progress-timeout: notices workers that reported progress (ProgressFile)
// and then reported none for the timeout (ProgressTimeout), however busy
// their CPU (NCCL's threads spin while a collective hangs).
//
// Runs on the agent's io_context: one steady timer ticks every eighth of the
// shortest timeout in force (at least 50 ms, at most 1 s) while workers are
// watched; each tick reads what each worker's file gained. When workers are
// stalled, `on_stalled` is called for the one that is furthest behind (the
// lowest step, then the longest silent): the others usually wait on it in a
// collective. A stalled worker whose CPU is busy comes first, and one that
// sleeps is judged only kIdleGrace (or two ticks) after its timeout: a rank
// waiting in a Gloo collective sleeps, and the one it waits for, busy on
// another node, is judged there first, which asks this node for its stacks
// instead (under NCCL every rank spins, and the lowest step decides alone).
// Once it takes the stall, the attempt is not judged again.
// Without the flag only the best step of each attempt is kept (for the
// crash-loop rule), read once a second.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>

#include "ddprun/launcher/core/progress_timeout.hpp"
#include "ddprun/launcher/watchdogs/progress_file.hpp"
#include "ddprun/net/asio.hpp"
#include "repeating_timer.hpp"

namespace ddprun::launcher {

class ProgressWatch {
 public:
  using Clock = std::chrono::steady_clock;
  struct Stalled {
    std::size_t index = 0;
    pid_t pid = 0;
    std::int64_t step = 0;                 // the last step it reported
    std::chrono::milliseconds silent{0};   // since that report
    std::chrono::milliseconds timeout{0};  // what it was held to
    std::string timeout_text;              // how that timeout was chosen
    bool busy = false;                     // its CPU was busy meanwhile
  };
  // Whether the stall was taken care of; if not, it is looked at again on
  // the next tick.
  using OnStalled = std::function<bool(const Stalled&)>;

  ProgressWatch(net::asio::io_context& io, ProgressTimeout timeout, OnStalled on_stalled);

  void watch(std::size_t index, pid_t pid, std::filesystem::path file);
  void forget(std::size_t index);
  // A new attempt: nothing is watched; what `auto` learned is kept.
  void clear();
  void stop();
  // The highest step any worker reported in this attempt, reading what the
  // files gained first.
  std::optional<std::int64_t> bestStep();
  // The highest step after which a worker of this attempt reported a
  // snapshot saved, reading what the files gained first.
  std::optional<std::int64_t> bestSnapshot();
  const ProgressTimeout& timeout() const { return timeout_; }

 private:
  struct Watched {
    pid_t pid = 0;
    ProgressFile file;
    int reports = 0;
    std::int64_t step = 0;
    Clock::time_point last_report;           // when its last report was read
    std::int64_t last_ts_ns = -1;            // that report's own timestamp, if it had one
    std::optional<std::uint64_t> cpu_ticks;  // its CPU time at the last tick
    bool busy = false;                       // it used at least half a CPU over the last tick
  };

  void arm();
  void tick();
  void readAll(Clock::time_point now);
  // What one worker's file gained since it was last read.
  void read(Watched& worker, Clock::time_point now);
  std::chrono::milliseconds period() const;
  // Samples each worker's CPU time: busy or asleep since the last tick.
  void sampleCpu();
  // The worker to judge now, if any: stalled, and past the grace if asleep.
  const Watched* culprit(Clock::time_point now, std::size_t& index) const;

  ProgressTimeout timeout_;
  OnStalled on_stalled_;
  RepeatingTimer timer_;
  std::map<std::size_t, Watched> watched_;
  std::optional<std::int64_t> best_step_;
  std::optional<std::int64_t> best_snapshot_;
  bool judged_ = false;  // this attempt's stall was taken
  bool stopped_ = false;
};

}  // namespace ddprun::launcher

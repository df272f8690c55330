// TORCHELASTIC_UNINTERRUPTIBLE_STATE_TIMEOUT, torch 2.14's D-state check
// (docs/torchrun-contract.md §7.1): a running worker found in uninterruptible
// sleep (state D in /proc/<pid>/stat) at every look for that long is stuck
// in the kernel (a wedged GPU driver, NIC or file system), and no restart on
// this node can help it.
//
// As torch does, it reads the worker's own /proc/<pid>/stat (its main
// thread), not its descendants', and a look that finds any other state
// starts the count again. It looks every quarter of the timeout (0.1 s to
// 1 s) while no worker is in D, and every 0.1 s (torch's monitor interval)
// once one is, so that a worker busy with I/O, in and out of D, is seen
// leaving it.
//
// Runs on the agent's io_context: one steady timer while workers are
// watched; nothing runs when the variable is off (no UninterruptibleWatch is
// made). Once `on_stuck` takes a worker, that worker is not reported again.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <map>
#include <optional>

#include "ddprun/net/asio.hpp"
#include "repeating_timer.hpp"

namespace ddprun::launcher {

class UninterruptibleWatch {
 public:
  using Clock = std::chrono::steady_clock;
  // Returns whether the agent took it; if not, it is looked at again.
  using OnStuck = std::function<bool(std::size_t index, pid_t pid, std::chrono::milliseconds in_d)>;

  UninterruptibleWatch(net::asio::io_context& io, std::chrono::milliseconds timeout,
                       OnStuck on_stuck);

  // A worker started; it is watched from now on.
  void watch(std::size_t index, pid_t pid);
  // The worker exited: no longer watched.
  void forget(std::size_t index);
  // Nothing is watched (a new attempt); the timer stops until watch().
  void clear();
  // Final: the timer stops, so the loop can end.
  void stop();

 private:
  struct Watched {
    pid_t pid = 0;
    std::optional<Clock::time_point> in_d_since;  // the first of the looks that found D
    bool reported = false;
  };

  void arm();
  void look();
  std::chrono::milliseconds nextLook() const;

  std::chrono::milliseconds timeout_;
  std::chrono::milliseconds period_;  // while no worker is in D
  OnStuck on_stuck_;
  RepeatingTimer timer_;
  std::map<std::size_t, Watched> watched_;
  bool stopped_ = false;
};

}  // namespace ddprun::launcher

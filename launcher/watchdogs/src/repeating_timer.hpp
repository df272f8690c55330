// RepeatingTimer: the tick of the watches that look at running workers
// (HangWatch, ProgressWatch, UninterruptibleWatch), each of which owns one.
// start() arms it for `period()` unless it is armed already; when it fires,
// `tick()` runs and says whether to go on (something is still watched), and
// the timer arms itself again for the period then in force. cancel() disarms
// it: a wait that had already completed is ignored.
//
// Runs on the agent's io_context thread, as its owner does.
#pragma once

#include <chrono>
#include <functional>

#include "ddprun/net/asio.hpp"

namespace ddprun::launcher {

class RepeatingTimer {
 public:
  using Period = std::function<std::chrono::milliseconds()>;
  using Tick = std::function<bool()>;  // whether to tick again

  RepeatingTimer(net::asio::io_context& io, Period period, Tick tick)
      : timer_(io), period_(std::move(period)), tick_(std::move(tick)) {}

  void start() {
    if (armed_) {
      return;
    }
    armed_ = true;
    timer_.expires_after(period_());
    timer_.async_wait([this](const net::error_code& error) {
      if (error || !armed_) {
        return;
      }
      armed_ = false;
      if (tick_()) {
        start();
      }
    });
  }

  void cancel() {
    timer_.cancel();
    armed_ = false;
  }

 private:
  net::asio::steady_timer timer_;
  Period period_;
  Tick tick_;
  bool armed_ = false;
};

}  // namespace ddprun::launcher

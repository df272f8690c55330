// Runs the RendezvousService's deadlines (heartbeat expiry, last calls) on one
// io_context: one steady_timer, brought forward to the service's next
// deadline whenever the rendezvous changes (never pushed back: a wake-up
// with nothing due just re-arms). Timer handlers run on that context's
// thread and take the store lock.
#pragma once

#include <atomic>
#include <chrono>
#include <mutex>
#include <optional>

#include "ddprun/net/asio.hpp"
#include "ddprun/rendezvous/key_space.hpp"
#include "ddprun/rendezvous/rendezvous_service.hpp"

namespace ddprun::rdzv {

class RendezvousTimer {
 public:
  RendezvousTimer(net::asio::io_context& io, std::mutex& store_mutex, RendezvousService& service,
                  KeySpace& keys);

  // The rendezvous changed: re-read its next deadline. Any thread; never
  // blocks on the store lock (the re-arm is posted).
  void changed();
  // Cancels the timer for good (server shutdown), so the io_context can run
  // out of work. The io_context's thread.
  void stop();

 private:
  void rearm();  // posted by changed()
  void arm();
  void onExpiry(const net::error_code& error);

  net::asio::io_context& io_;
  std::mutex& store_mutex_;
  RendezvousService& service_;
  KeySpace& keys_;
  net::asio::steady_timer timer_;
  bool stopped_ = false;  // the io_context's thread only
  bool armed_ = false;    // a wait is pending, for armed_for_ (that thread only)
  RendezvousService::Clock::time_point armed_for_;  // the deadline the timer waits for
  std::atomic<bool> rearm_posted_{false};           // a rearm() is queued and not yet begun
  // A timer this late means the daemon itself did not run.
  static constexpr std::chrono::milliseconds kStalled{250};
};

}  // namespace ddprun::rdzv

#include "rendezvous_timer.hpp"

namespace ddprun::rdzv {

RendezvousTimer::RendezvousTimer(net::asio::io_context& io, std::mutex& store_mutex,
                                 RendezvousService& service, KeySpace& keys)
    : io_(io), store_mutex_(store_mutex), service_(service), keys_(keys), timer_(io) {}

// One re-arm in flight at most: a start-up storm of joins and every
// heartbeat call this, and one read of the deadline serves them all.
void RendezvousTimer::changed() {
  if (!rearm_posted_.exchange(true)) {
    net::asio::post(io_, [this] { rearm(); });
  }
}

void RendezvousTimer::stop() {
  stopped_ = true;
  timer_.cancel();
}

void RendezvousTimer::rearm() {
  // Cleared before the deadline is read: a change after the read posts again.
  rearm_posted_ = false;
  arm();
}

// A deadline that did not move, or moved later (the oldest agent was heard
// from), leaves the timer as it is: waking early costs one tick that finds
// nothing due, cancelling costs a cancel and a re-arm for every heartbeat.
void RendezvousTimer::arm() {
  if (stopped_) {
    return;
  }
  std::optional<RendezvousService::Clock::time_point> deadline;
  {
    std::lock_guard lock(store_mutex_);
    deadline = service_.nextDeadline();
  }
  if (!deadline || (armed_ && armed_for_ <= *deadline)) {
    return;
  }
  armed_ = true;
  armed_for_ = *deadline;
  timer_.expires_at(*deadline);  // cancels the wait for a later deadline
  timer_.async_wait([this](const net::error_code& error) { onExpiry(error); });
}

void RendezvousTimer::onExpiry(const net::error_code& error) {
  if (error || stopped_) {
    return;  // cancelled by an earlier deadline or by the server stopping
  }
  armed_ = false;
  {
    const auto now = RendezvousService::Clock::now();
    std::lock_guard lock(store_mutex_);
    // Woken this late, the daemon did not run meanwhile (stopped, paused):
    // the heartbeats queued on its sockets are not read yet, and the
    // agents' silence was its own.
    if (const auto late = now - armed_for_; late > kStalled) {
      service_.excuseStall(late, now);
    }
    service_.tick(now, keys_);
  }
  arm();
}

}  // namespace ddprun::rdzv

#include "rendezvous_timer.hpp"

namespace ddprun::rdzv {

RendezvousTimer::RendezvousTimer(net::asio::io_context& io, std::mutex& store_mutex,
                                 RendezvousService& service, KeySpace& keys)
    : io_(io), store_mutex_(store_mutex), service_(service), keys_(keys), timer_(io) {}

void RendezvousTimer::changed() {
  net::asio::post(io_, [this] { rearm(); });
}

void RendezvousTimer::stop() {
  stopped_ = true;
  timer_.cancel();
}

void RendezvousTimer::rearm() {
  if (stopped_) {
    return;
  }
  std::optional<RendezvousService::Clock::time_point> deadline;
  {
    std::lock_guard lock(store_mutex_);
    deadline = service_.nextDeadline();
  }
  timer_.cancel();
  if (!deadline) {
    return;
  }
  armed_for_ = *deadline;
  timer_.expires_at(*deadline);
  timer_.async_wait([this](const net::error_code& error) { onExpiry(error); });
}

void RendezvousTimer::onExpiry(const net::error_code& error) {
  if (error || stopped_) {
    return;  // cancelled by a re-arm or by the server stopping
  }
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
  rearm();
}

}  // namespace ddprun::rdzv

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
  timer_.expires_at(*deadline);
  timer_.async_wait([this](const net::error_code& error) { onExpiry(error); });
}

void RendezvousTimer::onExpiry(const net::error_code& error) {
  if (error || stopped_) {
    return;  // cancelled by a re-arm or by the server stopping
  }
  {
    std::lock_guard lock(store_mutex_);
    service_.tick(RendezvousService::Clock::now(), keys_);
  }
  rearm();
}

}  // namespace ddprun::rdzv

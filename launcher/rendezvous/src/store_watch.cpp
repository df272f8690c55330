#include "store_watch.hpp"

#include <memory>

#include "ddprun/proto/errors.hpp"
#include "ddprun/rendezvous/client.hpp"

namespace ddprun::launcher {

StoreWatch::StoreWatch(std::string host, std::uint16_t port, std::string never_set_key,
                       Duration interval, Duration bound,
                       std::function<void(const std::string& why)> lost,
                       std::function<void(rdzv::StoreClient&)> connected)
    : host_(std::move(host)),
      port_(port),
      key_(std::move(never_set_key)),
      interval_(interval),
      bound_(bound),
      lost_(std::move(lost)),
      connected_(std::move(connected)),
      thread_([this] { watch(); }) {}

StoreWatch::~StoreWatch() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    if (client_ != nullptr) {
      client_->interrupt();
    }
  }
  thread_.join();
}

void StoreWatch::watch() {
  std::unique_ptr<rdzv::StoreClient> client;  // outlives every use of client_
  std::string why;
  try {
    client = std::make_unique<rdzv::StoreClient>(host_, port_, bound_);
    {
      std::lock_guard lock(mutex_);
      if (stopping_) {
        return;
      }
      client_ = client.get();
    }
    if (connected_) {
      connected_(*client);
    }
    for (;;) {
      try {
        client->wait({key_}, interval_);  // ends at once if the connection drops
      } catch (const TimeoutError&) {
        // The usual end of a wait: nobody sets that key.
      }
      client->ping();  // answered within the bound, or the store is gone
    }
  } catch (const Error& error) {
    why = error.what();
  }
  {
    std::lock_guard lock(mutex_);
    client_ = nullptr;
    if (stopping_) {
      return;
    }
  }
  lost_(why);
}

}  // namespace ddprun::launcher

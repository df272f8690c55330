#include "store_connection.hpp"

#include <algorithm>

#include "ddprun/proto/errors.hpp"

namespace ddprun::launcher {

std::unique_ptr<rdzv::StoreClient> connectToStore(const std::string& host, std::uint16_t port,
                                                  WaitNotice& notice,
                                                  const std::atomic<bool>& cancelled,
                                                  const std::function<void()>& before_attempt) {
  using std::chrono::milliseconds;
  for (;;) {
    if (cancelled) {
      return nullptr;
    }
    if (before_attempt) {
      before_attempt();
    }
    // At least long enough for a connect and its VALIDATE/PING round trip.
    const milliseconds slice = std::clamp(notice.next(), milliseconds(250), milliseconds(1000));
    try {
      return std::make_unique<rdzv::StoreClient>(host, port, slice);
    } catch (const TimeoutError& error) {
      if (notice.expired()) {
        throw;
      }
      notice.setDetail(std::string("last attempt: ") + error.what());
    }
    notice.tick();
  }
}

}  // namespace ddprun::launcher

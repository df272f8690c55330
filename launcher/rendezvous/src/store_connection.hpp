// Connecting to a store that may not be up yet (node 0 or the rendezvous
// host starts later than this agent), without ever waiting in silence: the
// attempts run in slices of a quarter of a second to a second, the
// WaitNotice says what is awaited once the first slice has failed, and a
// cancel flag set by another thread ends the wait within a slice. Runs on
// the waiting thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "ddprun/launcher/rendezvous/wait_notice.hpp"
#include "ddprun/rendezvous/client.hpp"

namespace ddprun::launcher {

// The connected client; nullptr when `cancelled` was set first. Throws
// TimeoutError (with the last connect error) once the notice's deadline
// passes. `before_attempt`, if set, runs before every attempt (e.g. to host
// the store here if this agent can).
std::unique_ptr<rdzv::StoreClient> connectToStore(const std::string& host, std::uint16_t port,
                                                  WaitNotice& notice,
                                                  const std::atomic<bool>& cancelled,
                                                  const std::function<void()>& before_attempt = {});

}  // namespace ddprun::launcher

// Opening a listening TCP socket the way ddprund does for both of its ports
// (the store's and the metrics'): an address given, or every address
// (IPv6 dual-stack, else IPv4), and one error naming every address tried.
// Called on the thread that owns the acceptor, before it serves.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "ddprun/net/asio.hpp"

namespace ddprun::rdzv {

// "[::1]:29400" or "127.0.0.1:29400".
std::string formatEndpoint(const net::tcp::endpoint& endpoint);

// Opens, binds and listens `acceptor` on `host`:`port` (empty host: every
// address). Throws ConfigError when `host` is not an IP address (naming
// `host_flag`), NetworkError naming every address tried when none works.
void listenOn(net::tcp::acceptor& acceptor, const std::string& host, std::uint16_t port,
              int backlog, std::string_view host_flag);

// After a failed accept (usually EMFILE: out of descriptors): logs it and
// runs `retry` in 100 ms on `timer`. Accepting again at once would fail
// again at once, spinning a core until a descriptor frees. `who` names the
// port ("ddprund", "ddprund metrics").
void acceptAgainLater(net::asio::steady_timer& timer, const net::error_code& error,
                      std::string_view who, std::function<void()> retry);

}  // namespace ddprun::rdzv

// Opening a listening TCP socket the way ddprund does for both of its ports
// (the store's and the metrics'): an address given, or every address
// (IPv6 dual-stack, else IPv4), and one error naming every address tried;
// and retrying a failed accept. Called on the thread that owns the acceptor.
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

// Accepting after a failed accept (usually EMFILE: out of descriptors):
// again in 100 ms, since at once would fail again at once, spinning a core
// until a descriptor frees. The failure is logged once per burst, as a
// warning that says what the limit is and how to raise it; each retry only at
// debug level, so a daemon out of descriptors for an hour writes one line,
// not 36,000. Runs on the acceptor's thread.
class AcceptBackoff {
 public:
  // `who` names the port ("ddprund", "ddprund metrics").
  AcceptBackoff(net::asio::io_context& io, std::string who);

  // An accept failed: logs it (once per burst) and runs `retry` in 100 ms.
  void failed(const net::error_code& error, std::function<void()> retry);
  // An accept succeeded: a burst of failures, if any, is over.
  void accepted();
  void cancel();

 private:
  net::asio::steady_timer timer_;
  std::string who_;
  std::uint64_t failures_ = 0;  // of the current burst
};

}  // namespace ddprun::rdzv

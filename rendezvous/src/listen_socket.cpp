#include "listen_socket.hpp"

#include "ddprun/proto/errors.hpp"
#include "descriptor_limit.hpp"
#include "log.hpp"

namespace ddprun::rdzv {
namespace {

bool tryListen(net::tcp::acceptor& acceptor, const net::tcp::endpoint& endpoint, bool dual_stack,
               int backlog, std::string& errors) {
  net::error_code error;
  acceptor.open(endpoint.protocol(), error);
  if (!error && dual_stack) {
    acceptor.set_option(net::asio::ip::v6_only(false), error);
  }
  if (!error) {
    acceptor.set_option(net::tcp::acceptor::reuse_address(true), error);
  }
  if (!error) {
    acceptor.bind(endpoint, error);
  }
  if (!error) {
    acceptor.listen(backlog, error);
  }
  if (error) {
    errors += (errors.empty() ? "" : "; ") + formatEndpoint(endpoint) + ": " + error.message();
    net::error_code ignored;
    acceptor.close(ignored);
    return false;
  }
  return true;
}

}  // namespace

std::string formatEndpoint(const net::tcp::endpoint& endpoint) {
  const auto address = endpoint.address();
  const std::string host = address.is_v6() ? "[" + address.to_string() + "]" : address.to_string();
  return host + ":" + std::to_string(endpoint.port());
}

void listenOn(net::tcp::acceptor& acceptor, const std::string& host, std::uint16_t port,
              int backlog, std::string_view host_flag) {
  std::string errors;
  if (host.empty()) {
    if (tryListen(acceptor, {net::asio::ip::address_v6::any(), port}, true, backlog, errors) ||
        tryListen(acceptor, {net::asio::ip::address_v4::any(), port}, false, backlog, errors)) {
      return;
    }
  } else {
    net::error_code error;
    const auto address = net::asio::ip::make_address(host, error);
    if (error) {
      throw ConfigError(std::string(host_flag) + " '" + host + "' is not an IP address");
    }
    if (tryListen(acceptor, {address, port}, false, backlog, errors)) {
      return;
    }
  }
  throw NetworkError("cannot listen (" + errors + ")");
}

AcceptBackoff::AcceptBackoff(net::asio::io_context& io, std::string who)
    : timer_(io), who_(std::move(who)) {}

void AcceptBackoff::failed(const net::error_code& error, std::function<void()> retry) {
  if (failures_++ == 0) {
    const std::string advice = error.category() == net::asio::error::get_system_category()
                                   ? descriptorAdvice(error.value())
                                   : std::string();
    rdzvLog().warn("{} cannot accept a connection: {}{}; retrying every 100 ms until it can", who_,
                   error.message(), advice.empty() ? "" : " (" + advice + ")");
  } else {
    rdzvLog().debug("{}: accept retry {} failed: {}", who_, failures_ - 1, error.message());
  }
  timer_.expires_after(std::chrono::milliseconds(100));
  timer_.async_wait([retry = std::move(retry)](const net::error_code& cancelled) {
    if (!cancelled) {
      retry();
    }
  });
}

void AcceptBackoff::accepted() {
  if (failures_ > 0) {
    rdzvLog().info("{} accepts connections again, after {} failed attempt(s)", who_, failures_);
    failures_ = 0;
  }
}

void AcceptBackoff::cancel() { timer_.cancel(); }

}  // namespace ddprun::rdzv

#include "ddprun/test_support/http_get.hpp"

// clang-format off
#include "ddprun/net/asio.hpp"  // first: it fixes Boost 1.74's Asio under GCC 12
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
// clang-format on

#include <stdexcept>

namespace ddprun::test_support {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;

}  // namespace

// Asynchronous operations run to their end on a private io_context: that is
// how Beast puts one deadline over connecting, writing and reading.
HttpAnswer httpGet(std::uint16_t port, const std::string& target, std::chrono::milliseconds timeout,
                   const std::string& host) {
  const std::string where = "http://" + host + ":" + std::to_string(port) + target;
  net::asio::io_context io;
  beast::tcp_stream stream(io);
  http::request<http::empty_body> request(http::verb::get, target, 11);
  request.set(http::field::host, host + ":" + std::to_string(port));
  request.set(http::field::connection, "close");
  beast::flat_buffer buffer;
  http::response<http::string_body> response;
  net::error_code failure;
  stream.expires_after(timeout);
  stream.async_connect(
      net::tcp::endpoint(net::asio::ip::make_address(host), port), [&](net::error_code error) {
        if (error) {
          failure = error;
          return;
        }
        http::async_write(stream, request, [&](net::error_code written, std::size_t) {
          if (written) {
            failure = written;
            return;
          }
          http::async_read(stream, buffer, response,
                           [&](net::error_code read, std::size_t) { failure = read; });
        });
      });
  io.run();
  if (failure) {
    throw std::runtime_error("GET " + where + ": " + failure.message());
  }
  const auto type = response[http::field::content_type];
  return {response.result_int(), std::string(type.data(), type.size()), response.body()};
}

std::string urlEncode(const std::string& text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string encoded;
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if ((byte >= 'A' && byte <= 'Z') || (byte >= 'a' && byte <= 'z') ||
        (byte >= '0' && byte <= '9') || c == '-' || c == '_' || c == '.' || c == '~') {
      encoded += c;
    } else {
      encoded += '%';
      encoded += kHex[byte >> 4];
      encoded += kHex[byte & 15];
    }
  }
  return encoded;
}

}  // namespace ddprun::test_support

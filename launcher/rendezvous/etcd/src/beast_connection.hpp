// One HTTP/1.1 connection to one etcd member over a Beast stream: the body
// of Connection (etcd_http.hpp) for either stream. ddprun instantiates it
// for plain TCP (etcd_http.cpp); the TLS module, which alone links OpenSSL,
// for Beast's ssl_stream (tls/etcd_tls_module.cpp), and defines handshake()
// for it.
//
// Owns its socket and its own io_context. Every operation runs on the
// calling thread: it starts Beast's asynchronous operation and runs the
// io_context until it completes, because Beast's stream deadlines
// (tcp_stream::expires_at) apply only to asynchronous operations. abort() is
// the one call another thread may make.
#pragma once

// clang-format off
#include "ddprun/net/asio.hpp"  // first: it fixes Boost 1.74's Asio under GCC 12
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
// clang-format on

#include <poll.h>

#include <atomic>
#include <cctype>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>

#include "etcd_http.hpp"

namespace ddprun::launcher::etcd::detail {

namespace beast = boost::beast;

template <class Stream>
class BeastConnection final : public Connection {
 public:
  static constexpr bool kPlain = std::is_same_v<Stream, beast::tcp_stream>;

  // No I/O. `stream_args` follow the io_context in the stream's constructor
  // (the TLS context, for ssl_stream).
  template <class... StreamArgs>
  BeastConnection(Member member, std::chrono::milliseconds request_timeout,
                  StreamArgs&&... stream_args)
      : member_(std::move(member)),
        request_timeout_(request_timeout),
        stream_(io_, std::forward<StreamArgs>(stream_args)...) {}

  void open(Clock::time_point deadline) override {
    const auto endpoints = resolve(deadline);
    // An abort() whose posted close ran during the resolve, on a socket not
    // yet open, must still stop the connect.
    if (aborted_) {
      throw MemberFailure("aborted");
    }
    lowest().expires_at(deadline);
    const net::error_code ec =
        complete([&](auto handler) { lowest().async_connect(endpoints, std::move(handler)); });
    if (ec) {
      throw MemberFailure(failure("", ec));
    }
    if constexpr (!kPlain) {
      handshake();
    }
  }

  HttpAnswer post(const std::string& target, const std::string& body,
                  Clock::time_point deadline) override {
    send(target, body, deadline);
    readWhole(target);
    return {parser_->get().result_int(), std::move(parser_->get().body())};
  }

  bool reusable() const override {
    return parser_ && parser_->is_done() && parser_->keep_alive() && buffer_.size() == 0;
  }

  bool closedWhileIdle() const override {
    // An idle HTTP/1.1 connection has nothing to read: readable means the
    // member closed it (end of stream), reset it, or broke the protocol.
    // Asio's native_handle() is not const, though it only reads.
    auto& socket = const_cast<BeastConnection*>(this)->lowest().socket();
    if (!socket.is_open()) {
      return true;
    }
    pollfd entry{socket.native_handle(), POLLIN, 0};
    return ::poll(&entry, 1, 0) != 0;
  }

  unsigned startStream(const std::string& target, const std::string& body,
                       Clock::time_point deadline, std::string& error_body) override {
    send(target, body, deadline);
    parser_->body_limit(boost::none);  // a watch streams for as long as it lives
    const net::error_code ec = complete([&](auto handler) {
      beast::http::async_read_header(stream_, buffer_, *parser_, std::move(handler));
    });
    if (ec) {
      throw MemberFailure(failure("reading the answer to " + target, ec));
    }
    const unsigned status = parser_->get().result_int();
    if (status != 200) {
      readWhole(target);
      error_body = parser_->get().body();
      return status;
    }
    // The body's bytes go to readStream's caller as they come, not into the
    // message.
    parser_->on_chunk_body(chunk_body_);
    return status;
  }

  bool readStream(std::optional<Clock::time_point> deadline,
                  const std::function<void(std::string_view)>& on_bytes) override {
    if (parser_->is_done()) {
      return false;
    }
    if (deadline) {
      lowest().expires_at(*deadline);
    } else {
      lowest().expires_never();
    }
    sink_ = &on_bytes;
    const net::error_code ec = complete([&](auto handler) {
      beast::http::async_read_some(stream_, buffer_, *parser_, std::move(handler));
    });
    sink_ = nullptr;
    if (ec) {
      throw MemberFailure(failure("the stream broke", ec));
    }
    return !parser_->is_done();
  }

  void abort() override {
    aborted_ = true;
    // Posted, because the socket belongs to the thread running the
    // io_context; a handler posted while nothing runs runs at the start of
    // the next operation, which then fails.
    net::asio::post(io_, [this] {
      net::error_code ignored;
      lowest().socket().shutdown(net::tcp::socket::shutdown_both, ignored);
      lowest().close();
    });
  }

 private:
  using Parser = beast::http::response_parser<beast::http::string_body>;

  // With TLS: the handshake after the connect, before the deadline already
  // set on the socket. Defined where the stream's type is (the TLS module).
  void handshake();

  beast::tcp_stream& lowest() { return beast::get_lowest_layer(stream_); }

  // Runs one asynchronous operation to completion on this thread.
  template <class Start>
  net::error_code complete(Start&& start) {
    std::optional<net::error_code> result;
    start([&result](net::error_code ec, auto&&...) { result = ec; });
    io_.restart();
    io_.run();
    return result.value_or(net::asio::error::operation_aborted);
  }

  // The phrase for a failed operation; `what` names the step.
  std::string failure(const std::string& what, const net::error_code& ec) const {
    if (ec == beast::error::timeout) {
      return what + ": no answer within " + std::to_string(request_timeout_.count()) + " ms";
    }
    std::string text = ec.message();
    if (!text.empty()) {
      text[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(text[0])));
    }
    return what.empty() ? text : what + ": " + text;
  }

  net::tcp::resolver::results_type resolve(Clock::time_point deadline) {
    net::tcp::resolver resolver(io_);
    net::asio::steady_timer timer(io_, deadline);
    timer.async_wait([&resolver](net::error_code ec) {
      if (!ec) {
        resolver.cancel();
      }
    });
    net::error_code result;
    net::tcp::resolver::results_type endpoints;
    resolver.async_resolve(member_.host, std::to_string(member_.port),
                           [&](net::error_code ec, net::tcp::resolver::results_type found) {
                             result = ec;
                             endpoints = std::move(found);
                             timer.cancel();
                           });
    io_.restart();
    io_.run();
    if (result) {
      throw MemberFailure(failure("cannot resolve " + member_.host, result));
    }
    return endpoints;
  }

  void send(const std::string& target, const std::string& body, Clock::time_point deadline) {
    beast::http::request<beast::http::string_body> request{beast::http::verb::post, target, 11};
    request.set(beast::http::field::host, describeMember(member_));
    request.set(beast::http::field::content_type, "application/json");
    request.body() = body;
    request.prepare_payload();
    lowest().expires_at(deadline);
    const net::error_code ec = complete(
        [&](auto handler) { beast::http::async_write(stream_, request, std::move(handler)); });
    if (ec) {
      throw MemberFailure(failure("sending " + target, ec));
    }
    parser_.emplace();
    parser_->body_limit(kAnswerLimit);
  }

  void readWhole(const std::string& target) {
    const net::error_code ec = complete([&](auto handler) {
      beast::http::async_read(stream_, buffer_, *parser_, std::move(handler));
    });
    if (!ec) {
      return;
    }
    // A member that serves TLS closes a plain connection without a word.
    if (kPlain && ec == beast::http::error::end_of_stream && !parser_->got_some()) {
      throw MemberFailure("closed the connection without answering " + target +
                          " (does it serve TLS only?)");
    }
    throw MemberFailure(failure("reading the answer to " + target, ec));
  }

  // A range of many keys can be large; etcd itself caps a request at
  // 1.5 MiB but not an answer.
  static constexpr std::uint64_t kAnswerLimit = 256ULL << 20;

  Member member_;
  std::chrono::milliseconds request_timeout_;
  std::atomic<bool> aborted_{false};
  net::asio::io_context io_;
  Stream stream_;
  beast::flat_buffer buffer_;
  std::optional<Parser> parser_;
  const std::function<void(std::string_view)>* sink_ = nullptr;  // during readStream
  // The parser keeps a reference to its chunk callback, so it lives here.
  std::function<std::size_t(std::uint64_t, beast::string_view, net::error_code&)> chunk_body_ =
      [this](std::uint64_t, beast::string_view bytes, net::error_code&) {
        if (sink_ != nullptr) {
          (*sink_)(std::string_view(bytes.data(), bytes.size()));
        }
        return bytes.size();
      };
};

}  // namespace ddprun::launcher::etcd::detail

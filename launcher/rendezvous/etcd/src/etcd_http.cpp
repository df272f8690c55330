#include "etcd_http.hpp"

// clang-format off
#include "ddprun/net/asio.hpp"  // first: it fixes Boost 1.74's Asio under GCC 12
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
// clang-format on

#include <poll.h>

#include <cctype>
#include <nlohmann/json.hpp>
#include <optional>

#include "ddprun/proto/errors.hpp"
#include "ddprun/proto/json_parse.hpp"

namespace ddprun::launcher::etcd::detail {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = boost::asio::ssl;
namespace asio = net::asio;
using net::error_code;
using net::tcp;

// A range of many keys can be large; etcd itself caps a request at 1.5 MiB
// but not an answer.
constexpr std::uint64_t kAnswerLimit = 256ULL << 20;

bool isIpAddress(const std::string& host) {
  error_code ec;
  asio::ip::make_address(host, ec);
  return !ec;
}

ssl::context makeTlsContext(const ClientOptions& options) {
  ssl::context context(ssl::context::tls_client);
  error_code ec;
  if (options.ca_file.empty()) {
    context.set_default_verify_paths(ec);
  } else {
    context.load_verify_file(options.ca_file, ec);
  }
  if (ec) {
    throw ConfigError("etcd: cannot load the CA file '" + options.ca_file + "': " + ec.message());
  }
  if (!options.cert_file.empty()) {
    context.use_certificate_chain_file(options.cert_file, ec);
    if (ec) {
      throw ConfigError("etcd: cannot load the client certificate '" + options.cert_file +
                        "': " + ec.message());
    }
  }
  if (!options.key_file.empty()) {
    context.use_private_key_file(options.key_file, ssl::context::pem, ec);
    if (ec) {
      throw ConfigError("etcd: cannot load the client key '" + options.key_file +
                        "': " + ec.message());
    }
  }
  context.set_verify_mode(ssl::verify_peer);
  return context;
}

// gRPC status codes that mean "not now, not here" (UNAVAILABLE: no leader,
// stopping; DEADLINE_EXCEEDED; RESOURCE_EXHAUSTED: too many requests).
bool memberCannotServe(int grpc_code, unsigned http_status) {
  if (grpc_code < 0) {
    return http_status >= 500;
  }
  return grpc_code == 14 || grpc_code == 4 || grpc_code == 8;
}

std::string firstLine(const std::string& text) {
  const std::string line = text.substr(0, text.find_first_of("\r\n"));
  return line.size() > 200 ? line.substr(0, 200) + "..." : line;
}

}  // namespace

std::optional<std::string> checkAnswer(const Member& member, const std::string& target,
                                       const HttpAnswer& answer) {
  const auto parsed = proto::parseJson(answer.body);
  int code = -1;
  std::string message;
  if (parsed.is_object() && parsed.contains("error")) {
    const auto& error = parsed["error"];
    if (error.is_object()) {  // streamed: {"error":{"grpc_code":14,"message":"..."}}
      code = error.value("grpc_code", -1);
      message = error.value("message", "");
    } else if (error.is_string()) {  // {"error":"...","code":14,"message":"..."}
      code = parsed.value("code", -1);
      message = error.get<std::string>();
    }
  }
  if (answer.status == 200 && message.empty() && code < 0) {
    return std::nullopt;
  }
  if (message.empty()) {
    message = "HTTP " + std::to_string(answer.status) + ": " + firstLine(answer.body);
  }
  if (memberCannotServe(code, answer.status)) {
    return message;
  }
  throw GatewayError("etcd at " + describeMember(member) + ": " + target + ": " + message, code);
}

std::string noMemberServed(const std::string& members, const std::string& target,
                           const std::vector<std::string>& failures) {
  std::string line = "etcd at " + members + ": no member served " + target + " (";
  for (std::size_t i = 0; i < failures.size(); ++i) {
    line += (i == 0 ? "" : "; ") + failures[i];
  }
  return line + ")";
}

std::string prefixEnd(const std::string& prefix) {
  std::string end = prefix;
  while (!end.empty() && static_cast<unsigned char>(end.back()) == 0xff) {
    end.pop_back();
  }
  if (end.empty()) {
    return std::string(1, '\0');  // etcd: every key from `prefix` on
  }
  end.back() = static_cast<char>(static_cast<unsigned char>(end.back()) + 1);
  return end;
}

std::string describeMember(const Member& member) {
  const bool v6 = member.host.find(':') != std::string::npos;
  return (v6 ? "[" + member.host + "]" : member.host) + ":" + std::to_string(member.port);
}

struct TlsContext {
  explicit TlsContext(const ClientOptions& options) : context(makeTlsContext(options)) {}
  ssl::context context;
};

std::shared_ptr<TlsContext> loadTlsContext(const ClientOptions& options) {
  return options.tls ? std::make_shared<TlsContext>(options) : nullptr;
}

struct Connection::Impl {
  Impl(const ClientOptions& client_options, Member to, std::shared_ptr<TlsContext> shared_tls)
      : options(client_options), member(std::move(to)), tls_context(std::move(shared_tls)) {}

  const ClientOptions& options;
  Member member;
  asio::io_context io;
  std::shared_ptr<TlsContext> tls_context;
  std::optional<beast::tcp_stream> plain;
  std::optional<beast::ssl_stream<beast::tcp_stream>> tls;
  beast::flat_buffer buffer;
  std::optional<http::response_parser<http::string_body>> parser;
  const std::function<void(std::string_view)>* sink = nullptr;  // during readStream
  // The parser keeps a reference to its chunk callback, so it lives here.
  std::function<std::size_t(std::uint64_t, beast::string_view, error_code&)> chunk_body =
      [this](std::uint64_t, beast::string_view bytes, error_code&) {
        if (sink != nullptr) {
          (*sink)(std::string_view(bytes.data(), bytes.size()));
        }
        return bytes.size();
      };

  beast::tcp_stream& lowest() { return tls ? beast::get_lowest_layer(*tls) : *plain; }

  // Runs one asynchronous operation to completion on this thread.
  template <class Start>
  error_code complete(Start&& start) {
    std::optional<error_code> result;
    start([&result](error_code ec, auto&&...) { result = ec; });
    io.restart();
    io.run();
    return result.value_or(asio::error::operation_aborted);
  }

  template <class Operation>
  error_code onStream(Operation&& operation) {
    if (tls) {
      return complete([&](auto handler) { operation(*tls, std::move(handler)); });
    }
    return complete([&](auto handler) { operation(*plain, std::move(handler)); });
  }

  // The phrase for a failed operation; `what` names the step.
  std::string failure(const std::string& what, const error_code& ec) const {
    if (ec == beast::error::timeout) {
      return what + ": no answer within " + std::to_string(options.request_timeout.count()) + " ms";
    }
    std::string text = ec.message();
    if (!text.empty()) {
      text[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(text[0])));
    }
    return what.empty() ? text : what + ": " + text;
  }

  tcp::resolver::results_type resolve(Clock::time_point deadline) {
    tcp::resolver resolver(io);
    asio::steady_timer timer(io, deadline);
    timer.async_wait([&resolver](error_code ec) {
      if (!ec) {
        resolver.cancel();
      }
    });
    error_code result;
    tcp::resolver::results_type endpoints;
    resolver.async_resolve(member.host, std::to_string(member.port),
                           [&](error_code ec, tcp::resolver::results_type found) {
                             result = ec;
                             endpoints = std::move(found);
                             timer.cancel();
                           });
    io.restart();
    io.run();
    if (result) {
      throw MemberFailure(failure("cannot resolve " + member.host, result));
    }
    return endpoints;
  }

  void send(const std::string& target, const std::string& body, Clock::time_point deadline) {
    http::request<http::string_body> request{http::verb::post, target, 11};
    request.set(http::field::host, describeMember(member));
    request.set(http::field::content_type, "application/json");
    request.body() = body;
    request.prepare_payload();
    lowest().expires_at(deadline);
    const error_code ec = onStream([&](auto& stream, auto handler) {
      http::async_write(stream, request, std::move(handler));
    });
    if (ec) {
      throw MemberFailure(failure("sending " + target, ec));
    }
    parser.emplace();
    parser->body_limit(kAnswerLimit);
  }

  void readWhole(const std::string& target) {
    const error_code ec = onStream([&](auto& stream, auto handler) {
      http::async_read(stream, buffer, *parser, std::move(handler));
    });
    if (!ec) {
      return;
    }
    // A member that serves TLS closes a plain connection without a word.
    if (ec == http::error::end_of_stream && !tls && !parser->got_some()) {
      throw MemberFailure("closed the connection without answering " + target +
                          " (does it serve TLS only?)");
    }
    throw MemberFailure(failure("reading the answer to " + target, ec));
  }
};

Connection::Connection(const ClientOptions& options, const Member& member,
                       std::shared_ptr<TlsContext> tls)
    : impl_(std::make_unique<Impl>(options, member, std::move(tls))) {
  if (impl_->tls_context) {
    impl_->tls.emplace(impl_->io, impl_->tls_context->context);
  } else {
    impl_->plain.emplace(impl_->io);
  }
}

Connection::~Connection() = default;

void Connection::open(Clock::time_point deadline) {
  Impl& impl = *impl_;
  const auto endpoints = impl.resolve(deadline);
  impl.lowest().expires_at(deadline);
  error_code ec = impl.complete(
      [&](auto handler) { impl.lowest().async_connect(endpoints, std::move(handler)); });
  if (ec) {
    throw MemberFailure(impl.failure("", ec));
  }
  if (!impl.tls) {
    return;
  }
  // SNI carries host names only (RFC 6066); the certificate check below
  // matches IP addresses against the certificate's IP SANs.
  if (!isIpAddress(impl.member.host)) {
    // SSL_set_tlsext_host_name, without its macro's C cast.
    SSL_ctrl(impl.tls->native_handle(), SSL_CTRL_SET_TLSEXT_HOSTNAME, TLSEXT_NAMETYPE_host_name,
             const_cast<char*>(impl.member.host.c_str()));
  }
  impl.tls->set_verify_callback(ssl::host_name_verification(impl.member.host));
  ec = impl.complete([&](auto handler) {
    impl.tls->async_handshake(ssl::stream_base::client, std::move(handler));
  });
  if (ec) {
    throw MemberFailure(impl.failure("TLS handshake failed", ec));
  }
}

HttpAnswer Connection::post(const std::string& target, const std::string& body,
                            Clock::time_point deadline) {
  impl_->send(target, body, deadline);
  impl_->readWhole(target);
  return {impl_->parser->get().result_int(), std::move(impl_->parser->get().body())};
}

bool Connection::reusable() const {
  const auto& parser = impl_->parser;
  return parser && parser->is_done() && parser->keep_alive() && impl_->buffer.size() == 0;
}

bool Connection::closedWhileIdle() const {
  // An idle HTTP/1.1 connection has nothing to read: readable means the
  // member closed it (end of stream), reset it, or broke the protocol.
  auto& socket = impl_->lowest().socket();
  if (!socket.is_open()) {
    return true;
  }
  pollfd entry{socket.native_handle(), POLLIN, 0};
  return ::poll(&entry, 1, 0) != 0;
}

unsigned Connection::startStream(const std::string& target, const std::string& body,
                                 Clock::time_point deadline, std::string& error_body) {
  Impl& impl = *impl_;
  impl.send(target, body, deadline);
  impl.parser->body_limit(boost::none);  // a watch streams for as long as it lives
  const error_code ec = impl.onStream([&](auto& stream, auto handler) {
    http::async_read_header(stream, impl.buffer, *impl.parser, std::move(handler));
  });
  if (ec) {
    throw MemberFailure(impl.failure("reading the answer to " + target, ec));
  }
  const unsigned status = impl.parser->get().result_int();
  if (status != 200) {
    impl.readWhole(target);
    error_body = impl.parser->get().body();
    return status;
  }
  // The body's bytes go to readStream's caller as they come, not into the
  // message.
  impl.parser->on_chunk_body(impl.chunk_body);
  return status;
}

bool Connection::readStream(std::optional<Clock::time_point> deadline,
                            const std::function<void(std::string_view)>& on_bytes) {
  Impl& impl = *impl_;
  if (impl.parser->is_done()) {
    return false;
  }
  if (deadline) {
    impl.lowest().expires_at(*deadline);
  } else {
    impl.lowest().expires_never();
  }
  impl.sink = &on_bytes;
  const error_code ec = impl.onStream([&](auto& stream, auto handler) {
    http::async_read_some(stream, impl.buffer, *impl.parser, std::move(handler));
  });
  impl.sink = nullptr;
  if (ec) {
    throw MemberFailure(impl.failure("the stream broke", ec));
  }
  return !impl.parser->is_done();
}

void Connection::abort() {
  // Posted, because the socket belongs to the thread running the io_context;
  // a handler posted while nothing runs runs at the start of the next
  // operation, which then fails.
  asio::post(impl_->io, [impl = impl_.get()] {
    error_code ignored;
    impl->lowest().socket().shutdown(tcp::socket::shutdown_both, ignored);
    impl->lowest().close();
  });
}

}  // namespace ddprun::launcher::etcd::detail

// Flow (all on the endpoint's thread): accept -> Connection::read (the
// header, up to its blank line, within a 10 s deadline) -> respond -> write
// -> read the next request on the same connection (Prometheus keeps it open)
// until the client closes, the deadline passes, or a request is refused. At
// most 64 connections are open; a newcomer past that closes the one that has
// waited longest for its next request, so clients that only hold connections
// cannot lock a scraper out.
//
// HTTP/1.1 as RFC 9112 asks of a server that takes no request content: the
// header is read up to its blank line (CRLF, or a bare LF, which Beast then
// refuses) and checked for obsolete line folding (a line starting with a
// blank: 400, which Beast's parser would accept) before Beast parses it. The
// body is never read: a method other than GET or HEAD is answered 405 at
// once, whatever it announces, and a GET or HEAD announcing content 400; an
// `Expect: 100-continue` therefore never gets a 100, only that final answer.
// After a response that ends the connection (`Connection: close`), the
// sending half is shut and what the client still sends is read and dropped
// for up to 2 s before closing, so that an unread body cannot turn the close
// into a reset that loses the response (RFC 9112 §9.6).
//
// Exceptions: the constructor throws when it cannot listen; after start(),
// every error is an error code that closes one connection; a collector that
// throws is answered 500.
#include "ddprun/rendezvous/metrics_endpoint.hpp"

// clang-format off
#include "ddprun/net/asio.hpp"  // first: it fixes Boost 1.74's Asio under GCC 12
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
// clang-format on

#include <array>
#include <chrono>
#include <list>
#include <optional>
#include <thread>

#include "ddprun/proto/errors.hpp"
#include "listen_socket.hpp"

namespace ddprun::rdzv {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;

constexpr auto kRequestDeadline = std::chrono::seconds(10);
constexpr auto kLingerTime = std::chrono::seconds(2);
constexpr std::uint32_t kHeaderLimit = 8 * 1024;
constexpr int kMaxConnections = 64;
constexpr int kBacklog = 64;

using Response = http::response<http::string_body>;

Response textResponse(http::status status, std::string body, std::string_view content_type,
                      unsigned version) {
  Response response(status, version);
  response.set(http::field::content_type,
               beast::string_view(content_type.data(), content_type.size()));
  response.set(http::field::server, "ddprun");
  response.body() = std::move(body);
  response.prepare_payload();
  return response;
}

Response plainText(http::status status, std::string body, unsigned version) {
  return textResponse(status, std::move(body), "text/plain; charset=utf-8", version);
}

// What one GET or HEAD gets; the path's query string, if any, is ignored.
Response answer(const http::request<http::empty_body>& request, const metrics::Registry& registry,
                const std::function<std::string()>& unhealthy) {
  const std::string_view target(request.target().data(), request.target().size());
  const std::string_view path = target.substr(0, target.find('?'));
  const unsigned version = request.version();
  if (path == "/healthz") {
    const std::string why = unhealthy ? unhealthy() : std::string();
    return why.empty() ? plainText(http::status::ok, "ok", version)
                       : plainText(http::status::service_unavailable, why + "\n", version);
  }
  if (path != "/metrics") {
    return plainText(http::status::not_found, "not found: try /metrics or /healthz\n", version);
  }
  try {
    return textResponse(http::status::ok, registry.scrape(), metrics::kContentType, version);
  } catch (const std::exception& error) {
    return plainText(http::status::internal_server_error,
                     std::string("cannot collect the metrics: ") + error.what() + "\n", version);
  }
}

// Any method but GET and HEAD, whatever its path or content.
Response methodNotAllowed(unsigned version) {
  Response refused = plainText(http::status::method_not_allowed, "only GET and HEAD\n", version);
  refused.set(http::field::allow, "GET, HEAD");
  return refused;
}

// A HEAD gets a GET's header (its Content-Length too) and no content.
Response withoutContent(Response response) {
  response.body().clear();
  return response;
}

// Where a request's header ends: after its blank line, whether its lines
// end in CRLF or in a bare LF (Beast refuses the latter with a 400, rather
// than the client waiting out the deadline). An Asio match condition
// (result_type marks it as one); when there is no match yet, it points at
// the last LF, where the next search resumes.
struct HeaderEnd {
  using result_type = bool;
  template <class Iterator>
  std::pair<Iterator, bool> operator()(Iterator begin, Iterator end) const {
    for (Iterator at = begin; at != end; ++at) {
      if (*at != '\n') {
        continue;
      }
      Iterator next = std::next(at);
      if (next != end && *next == '\r') {
        ++next;
      }
      if (next == end) {
        return {at, false};
      }
      if (*next == '\n') {
        return {std::next(next), true};
      }
    }
    return {end, false};
  }
};

// Obsolete line folding (RFC 9112 §5.2), and a blank before the first field
// (§2.2): a header line after the request line that starts with SP or HTAB.
bool hasFoldedLine(std::string_view header) {
  for (std::size_t lf = header.find('\n'); lf != std::string_view::npos && lf + 1 < header.size();
       lf = header.find('\n', lf + 1)) {
    if (header[lf + 1] == ' ' || header[lf + 1] == '\t') {
      return true;
    }
  }
  return false;
}

class Connection;
// The connections counted against the limit, oldest first (endpoint thread).
using OpenConnections = std::list<Connection*>;

// One client's connection: reads requests, answers each, until it closes or
// misbehaves. Held by its pending handler; leaves `open` when gone or evicted.
class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(net::tcp::socket socket, const metrics::Registry& registry,
             const std::function<std::string()>& unhealthy, OpenConnections& open)
      : stream_(std::move(socket)),
        registry_(registry),
        unhealthy_(unhealthy),
        open_(open),
        listed_(open.insert(open.end(), this)) {}
  ~Connection() { unlist(); }

  // Closes the connection among `open` that has waited longest for a
  // request, if any does (one being answered is not idle). Its handler then
  // ends with an error, releasing it.
  static bool evictLongestIdle(OpenConnections& open) {
    Connection* idlest = nullptr;
    for (Connection* connection : open) {
      if (connection->waiting_since_ &&
          (idlest == nullptr || *connection->waiting_since_ < *idlest->waiting_since_)) {
        idlest = connection;
      }
    }
    if (idlest == nullptr) {
      return false;
    }
    idlest->unlist();
    idlest->close();
    return true;
  }

  void read() {
    waiting_since_ = std::chrono::steady_clock::now();
    stream_.expires_after(kRequestDeadline);
    net::asio::async_read_until(
        stream_, net::asio::dynamic_buffer(input_, kHeaderLimit), HeaderEnd(),
        [self = shared_from_this()](const net::error_code& error, std::size_t header_size) {
          self->onHeader(error, header_size);
        });
  }

 private:
  void onHeader(const net::error_code& error, std::size_t header_size) {
    waiting_since_.reset();
    if (error == net::asio::error::not_found) {  // no blank line within the limit
      refuse(plainText(http::status::bad_request, "bad request: header too large\n", 11));
      return;
    }
    if (error) {
      close();  // closed, reset, too slow, or stopping: nobody to answer
      return;
    }
    const std::string_view header(input_.data(), header_size);
    if (hasFoldedLine(header)) {
      refuse(plainText(http::status::bad_request,
                       "bad request: obsolete line folding (a header line starting with a "
                       "blank) is not accepted\n",
                       11));
      return;
    }
    http::request_parser<http::empty_body> parser;
    parser.header_limit(kHeaderLimit);
    beast::error_code parsed;
    parser.put(net::asio::buffer(header), parsed);
    input_.erase(0, header_size);  // what is left is the next request's
    if (!parsed && !parser.is_header_done()) {
      parsed = http::error::partial_message;
    }
    if (parsed) {
      refuse(plainText(http::status::bad_request, "bad request: " + parsed.message() + "\n", 11));
      return;
    }
    respond(parser);
  }

  void respond(const http::request_parser<http::empty_body>& parser) {
    const auto& request = parser.get();
    const http::verb method = request.method();
    if (method != http::verb::get && method != http::verb::head) {
      refuse(methodNotAllowed(request.version()));
    } else if (!parser.is_done()) {  // it announces content, which is never read
      refuse(plainText(http::status::bad_request,
                       "bad request: a " + std::string(request.method_string()) + " with content\n",
                       request.version()));
    } else if (method == http::verb::head) {
      write(withoutContent(answer(request, registry_, unhealthy_)), request.keep_alive());
    } else {
      write(answer(request, registry_, unhealthy_), request.keep_alive());
    }
  }

  // Answers, then ends the connection: what follows the header is not read.
  void refuse(Response response) { write(std::move(response), false); }

  void write(Response response, bool keep_alive) {
    response_ = std::move(response);
    response_.keep_alive(keep_alive);
    stream_.expires_after(kRequestDeadline);
    http::async_write(
        stream_, response_,
        [self = shared_from_this(), keep_alive](const net::error_code& error, std::size_t) {
          if (error) {
            self->close();
          } else if (keep_alive) {
            self->read();
          } else {
            self->linger();
          }
        });
  }

  // The response is sent and the connection ends: the sending half is shut
  // (the client reads the response, then its end), and whatever the client
  // still sends is dropped until it closes or kLingerTime passes. Closing
  // with unread bytes would send a reset, which can cost the client the
  // response. Evictable meanwhile, as an idle connection is.
  void linger() {
    net::error_code ignored;
    stream_.socket().shutdown(net::tcp::socket::shutdown_send, ignored);
    stream_.expires_after(kLingerTime);
    waiting_since_ = std::chrono::steady_clock::now();
    drain();
  }

  void drain() {
    stream_.async_read_some(net::asio::buffer(dropped_),
                            [self = shared_from_this()](const net::error_code& error, std::size_t) {
                              if (error) {
                                self->close();
                              } else {
                                self->drain();
                              }
                            });
  }

  void unlist() {
    if (listed_ != open_.end()) {
      open_.erase(listed_);
      listed_ = open_.end();
    }
  }

  void close() {
    waiting_since_.reset();
    net::error_code ignored;
    stream_.socket().shutdown(net::tcp::socket::shutdown_both, ignored);
    stream_.close();
  }

  beast::tcp_stream stream_;
  std::string input_;               // the next request's bytes, at most kHeaderLimit
  std::array<char, 1024> dropped_;  // what a lingering client still sends
  Response response_;
  const metrics::Registry& registry_;
  const std::function<std::string()>& unhealthy_;  // the endpoint's options'
  OpenConnections& open_;
  OpenConnections::iterator listed_;  // open_.end() once it no longer counts
  // Set while waiting for a request; the eviction order.
  std::optional<std::chrono::steady_clock::time_point> waiting_since_;
};

}  // namespace

struct MetricsEndpoint::Impl {
  Impl(MetricsEndpointOptions opts, const metrics::Registry& reg)
      : options(std::move(opts)), registry(reg) {
    try {
      listenOn(*acceptor, options.host, options.port, kBacklog, "--metrics-host");
    } catch (const NetworkError& error) {
      throw NetworkError(std::string("metrics: ") + error.what());
    }
    bound = acceptor->local_endpoint();
  }

  void accept() {
    acceptor->async_accept([this](const net::error_code& error, net::tcp::socket socket) {
      if (error == net::asio::error::operation_aborted || !acceptor->is_open()) {
        return;
      }
      if (error) {
        accept_backoff->failed(error, [this] { accept(); });
        return;
      }
      accept_backoff->accepted();
      if (open_connections.size() >= static_cast<std::size_t>(kMaxConnections) &&
          !Connection::evictLongestIdle(open_connections)) {
        net::error_code ignored;
        socket.close(ignored);  // every connection is being answered: the newcomer waits its turn
      } else {
        std::make_shared<Connection>(std::move(socket), registry, options.unhealthy,
                                     open_connections)
            ->read();
      }
      accept();
    });
  }

  MetricsEndpointOptions options;
  const metrics::Registry& registry;
  // Endpoint thread; outlives every Connection (declared first).
  OpenConnections open_connections;
  // Destroyed by stop(): with the io_context go the handlers still pending,
  // and with them every connection they hold.
  std::optional<net::asio::io_context> io{std::in_place, 1};
  std::optional<net::tcp::acceptor> acceptor{std::in_place, *io};
  std::optional<AcceptBackoff> accept_backoff{std::in_place, *io, "ddprund metrics"};
  net::tcp::endpoint bound;
  std::thread thread;
  bool started = false;
  bool stopped = false;
};

MetricsEndpoint::MetricsEndpoint(MetricsEndpointOptions options, const metrics::Registry& registry)
    : impl_(std::make_unique<Impl>(std::move(options), registry)) {}

MetricsEndpoint::~MetricsEndpoint() { stop(); }

std::uint16_t MetricsEndpoint::port() const { return impl_->bound.port(); }

std::string MetricsEndpoint::listenAddress() const { return formatEndpoint(impl_->bound); }

void MetricsEndpoint::start() {
  if (impl_->started) {
    return;
  }
  impl_->started = true;
  impl_->accept();
  impl_->thread = std::thread([impl = impl_.get()] { impl->io->run(); });
}

void MetricsEndpoint::stop() {
  if (impl_->stopped) {
    return;
  }
  impl_->stopped = true;
  impl_->io->stop();
  if (impl_->thread.joinable()) {
    impl_->thread.join();
  }
  impl_->accept_backoff.reset();
  impl_->acceptor.reset();
  impl_->io.reset();  // closes every connection: their handlers are destroyed with it
}

}  // namespace ddprun::rdzv

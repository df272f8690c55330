// Flow (all on the endpoint's thread): accept -> Connection::read (a 10 s
// deadline) -> respond -> write -> read the next request on the same
// connection (Prometheus keeps it open) until the client closes, the
// deadline passes, or a request is refused. At most 64 connections are open;
// a newcomer past that closes the one that has waited longest for its next
// request, so clients that only hold connections cannot lock a scraper out.
// Exceptions: the constructor throws when it cannot listen; after start(),
// every error is an error code that closes one connection; a collector that
// throws is answered 500.
#include "ddprun/rendezvous/metrics_endpoint.hpp"

// clang-format off
#include "ddprun/net/asio.hpp"  // first: it fixes Boost 1.74's Asio under GCC 12
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
// clang-format on

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

// What one request gets; the path's query string, if any, is ignored.
Response answer(const http::request<http::empty_body>& request, const metrics::Registry& registry) {
  const std::string_view target(request.target().data(), request.target().size());
  const std::string_view path = target.substr(0, target.find('?'));
  const unsigned version = request.version();
  if (path != "/metrics" && path != "/healthz") {
    return textResponse(http::status::not_found, "not found: try /metrics or /healthz\n",
                        "text/plain; charset=utf-8", version);
  }
  if (request.method() != http::verb::get) {
    Response refused = textResponse(http::status::method_not_allowed, "only GET\n",
                                    "text/plain; charset=utf-8", version);
    refused.set(http::field::allow, "GET");
    return refused;
  }
  if (path == "/healthz") {
    return textResponse(http::status::ok, "ok", "text/plain; charset=utf-8", version);
  }
  try {
    return textResponse(http::status::ok, registry.scrape(), metrics::kContentType, version);
  } catch (const std::exception& error) {
    return textResponse(http::status::internal_server_error,
                        std::string("cannot collect the metrics: ") + error.what() + "\n",
                        "text/plain; charset=utf-8", version);
  }
}

class Connection;
// The connections counted against the limit, oldest first (endpoint thread).
using OpenConnections = std::list<Connection*>;

// One client's connection: reads requests, answers each, until it closes or
// misbehaves. Held by its pending handler; leaves `open` when gone or evicted.
class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(net::tcp::socket socket, const metrics::Registry& registry, OpenConnections& open)
      : stream_(std::move(socket)),
        registry_(registry),
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
    parser_.emplace();
    parser_->header_limit(kHeaderLimit);
    stream_.expires_after(kRequestDeadline);
    http::async_read(stream_, buffer_, *parser_,
                     [self = shared_from_this()](const net::error_code& error, std::size_t) {
                       self->onRead(error);
                     });
  }

 private:
  void onRead(const net::error_code& error) {
    waiting_since_.reset();
    if (error == http::error::end_of_stream || (error && error.category() != badRequest())) {
      close();  // closed, reset, too slow, or stopping: nobody to answer
      return;
    }
    if (error) {
      // Unparsable, too large, or with a body: answered, then closed.
      write(textResponse(http::status::bad_request, "bad request: " + error.message() + "\n",
                         "text/plain; charset=utf-8", 11),
            false);
      return;
    }
    const auto& request = parser_->get();
    write(answer(request, registry_), request.keep_alive());
  }

  void write(Response response, bool keep_alive) {
    response_ = std::move(response);
    response_.keep_alive(keep_alive);
    stream_.expires_after(kRequestDeadline);
    http::async_write(
        stream_, response_,
        [self = shared_from_this(), keep_alive](const net::error_code& error, std::size_t) {
          if (error || !keep_alive) {
            self->close();
          } else {
            self->read();
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

  // Beast's parse errors, all of one category (end_of_stream aside).
  static const boost::system::error_category& badRequest() {
    return make_error_code(http::error::bad_target).category();
  }

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_{2 * kHeaderLimit};  // a cap: never grows past it
  std::optional<http::request_parser<http::empty_body>> parser_;
  Response response_;
  const metrics::Registry& registry_;
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
        std::make_shared<Connection>(std::move(socket), registry, open_connections)->read();
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

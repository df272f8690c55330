// ddprun's etcd TLS module: Beast's ssl_stream over OpenSSL behind the C
// interface of etcd_tls_abi.hpp. ddprun loads it for protocol=https only, so
// no other start maps or relocates OpenSSL.
//
// Each entry point catches whatever its work throws and returns it as a
// status and a line: nothing thrown here reaches ddprun's own runtime.
#include "beast_connection.hpp"

// clang-format off
#include <boost/asio/ssl.hpp>
#include <boost/beast/ssl.hpp>
// clang-format on

#include <algorithm>
#include <cstring>
#include <exception>
#include <memory>
#include <string>

#include "ddprun/proto/errors.hpp"
#include "etcd_tls_abi.hpp"

namespace ddprun::launcher::etcd::detail {
namespace {

namespace ssl = boost::asio::ssl;
using TlsStream = beast::ssl_stream<beast::tcp_stream>;

bool isIpAddress(const std::string& host) {
  net::error_code ec;
  net::asio::ip::make_address(host, ec);
  return !ec;
}

}  // namespace

template <>
void BeastConnection<TlsStream>::handshake() {
  // SNI carries host names only (RFC 6066); the certificate check below
  // matches IP addresses against the certificate's IP SANs.
  if (!isIpAddress(member_.host)) {
    // SSL_set_tlsext_host_name, without its macro's C cast.
    SSL_ctrl(stream_.native_handle(), SSL_CTRL_SET_TLSEXT_HOSTNAME, TLSEXT_NAMETYPE_host_name,
             const_cast<char*>(member_.host.c_str()));
  }
  stream_.set_verify_callback(ssl::host_name_verification(member_.host));
  const net::error_code ec = complete(
      [&](auto handler) { stream_.async_handshake(ssl::stream_base::client, std::move(handler)); });
  if (ec) {
    throw MemberFailure(failure("TLS handshake failed", ec));
  }
}

namespace {

// The sink asked the read to stop; its caller knows why.
struct SinkStopped : std::exception {
  const char* what() const noexcept override { return "the caller stopped the read"; }
};

ssl::context makeTlsContext(const char* ca_file, const char* cert_file, const char* key_file) {
  ssl::context context(ssl::context::tls_client);
  net::error_code ec;
  if (*ca_file == '\0') {
    context.set_default_verify_paths(ec);
  } else {
    context.load_verify_file(ca_file, ec);
  }
  if (ec) {
    throw ConfigError(std::string("etcd: cannot load the CA file '") + ca_file +
                      "': " + ec.message());
  }
  if (*cert_file != '\0') {
    context.use_certificate_chain_file(cert_file, ec);
    if (ec) {
      throw ConfigError(std::string("etcd: cannot load the client certificate '") + cert_file +
                        "': " + ec.message());
    }
  }
  if (*key_file != '\0') {
    context.use_private_key_file(key_file, ssl::context::pem, ec);
    if (ec) {
      throw ConfigError(std::string("etcd: cannot load the client key '") + key_file +
                        "': " + ec.message());
    }
  }
  context.set_verify_mode(ssl::verify_peer);
  return context;
}

Clock::time_point deadlineFrom(std::int64_t ns) {
  return Clock::time_point(std::chrono::nanoseconds(ns));
}

void say(DdprunEtcdTlsError* error, int status, const char* text) {
  error->status = status;
  const std::size_t length = std::min(std::strlen(text), sizeof(error->text) - 1);
  std::memcpy(error->text, text, length);
  error->text[length] = '\0';
}

// Runs `work`, turning what it throws into a status and a line. Every entry
// point is noexcept besides: what gets past this ends the process rather
// than unwinding into ddprun's runtime.
template <class Work>
int guarded(DdprunEtcdTlsError* error, Work&& work) noexcept {
  try {
    work();
    return kDdprunEtcdTlsOk;
  } catch (const ConfigError& e) {
    say(error, kDdprunEtcdTlsConfigError, e.what());
  } catch (const std::exception& e) {
    say(error, kDdprunEtcdTlsMemberFailure, e.what());
  } catch (...) {
    say(error, kDdprunEtcdTlsMemberFailure, "an unknown failure in the TLS module");
  }
  return error->status;
}

// The caller's sink as the connection's std::function.
auto toBytesFunction(DdprunEtcdTlsSink sink, void* user) {
  return [sink, user](std::string_view bytes) {
    if (sink(user, bytes.data(), bytes.size()) != 0) {
      throw SinkStopped();
    }
  };
}

using TlsConnection = BeastConnection<TlsStream>;
TlsConnection& connectionAt(void* connection) { return *static_cast<TlsConnection*>(connection); }

void* loadContext(const char* ca_file, const char* cert_file, const char* key_file,
                  DdprunEtcdTlsError* error) noexcept {
  ssl::context* context = nullptr;
  guarded(error, [&] {
    context =
        std::make_unique<ssl::context>(makeTlsContext(ca_file, cert_file, key_file)).release();
  });
  return context;
}

void freeContext(void* context) noexcept { delete static_cast<ssl::context*>(context); }

void* newConnection(void* context, const char* host, std::uint16_t port,
                    std::int64_t request_timeout_ms, DdprunEtcdTlsError* error) noexcept {
  TlsConnection* connection = nullptr;
  guarded(error, [&] {
    connection = std::make_unique<TlsConnection>(Member{host, port},
                                                 std::chrono::milliseconds(request_timeout_ms),
                                                 *static_cast<ssl::context*>(context))
                     .release();
  });
  return connection;
}

void freeConnection(void* connection) noexcept { delete static_cast<TlsConnection*>(connection); }

int open(void* connection, std::int64_t deadline_ns, DdprunEtcdTlsError* error) noexcept {
  return guarded(error, [&] { connectionAt(connection).open(deadlineFrom(deadline_ns)); });
}

int post(void* connection, const char* target, const char* body, std::size_t body_size,
         std::int64_t deadline_ns, unsigned* status, DdprunEtcdTlsSink answer, void* user,
         DdprunEtcdTlsError* error) noexcept {
  return guarded(error, [&] {
    const HttpAnswer reply =
        connectionAt(connection)
            .post(target, std::string(body, body_size), deadlineFrom(deadline_ns));
    *status = reply.status;
    toBytesFunction(answer, user)(reply.body);
  });
}

int reusable(const void* connection) noexcept {
  return static_cast<const TlsConnection*>(connection)->reusable() ? 1 : 0;
}

int closedWhileIdle(const void* connection) noexcept {
  return static_cast<const TlsConnection*>(connection)->closedWhileIdle() ? 1 : 0;
}

int startStream(void* connection, const char* target, const char* body, std::size_t body_size,
                std::int64_t deadline_ns, unsigned* status, DdprunEtcdTlsSink error_body,
                void* user, DdprunEtcdTlsError* error) noexcept {
  return guarded(error, [&] {
    std::string refusal;
    *status =
        connectionAt(connection)
            .startStream(target, std::string(body, body_size), deadlineFrom(deadline_ns), refusal);
    toBytesFunction(error_body, user)(refusal);
  });
}

int readStream(void* connection, int has_deadline, std::int64_t deadline_ns,
               DdprunEtcdTlsSink on_bytes, void* user, DdprunEtcdTlsError* error) noexcept {
  bool more = false;
  const int status = guarded(error, [&] {
    std::optional<Clock::time_point> deadline;
    if (has_deadline != 0) {
      deadline = deadlineFrom(deadline_ns);
    }
    more = connectionAt(connection).readStream(deadline, toBytesFunction(on_bytes, user));
  });
  if (status != kDdprunEtcdTlsOk) {
    return -1;
  }
  return more ? 1 : 0;
}

void abort(void* connection) noexcept { connectionAt(connection).abort(); }

constexpr DdprunEtcdTlsApi kApi{
    .abi_version = kDdprunEtcdTlsAbiVersion,
    .load_context = loadContext,
    .free_context = freeContext,
    .new_connection = newConnection,
    .free_connection = freeConnection,
    .open = open,
    .post = post,
    .reusable = reusable,
    .closed_while_idle = closedWhileIdle,
    .start_stream = startStream,
    .read_stream = readStream,
    .abort = abort,
};

}  // namespace
}  // namespace ddprun::launcher::etcd::detail

extern "C" __attribute__((visibility("default"))) const DdprunEtcdTlsApi* ddprun_etcd_tls_api_v1() {
  return &ddprun::launcher::etcd::detail::kApi;
}

// The etcd client's transport: one HTTP/1.1 connection to one etcd member,
// plain or TLS, with Boost.Beast (beast_connection.hpp). The client and the
// watch see this small interface.
//
// TLS is a module ddprun loads when protocol=https asks for it
// (etcd_tls_client.cpp; the module itself is tls/): OpenSSL, linked into
// ddprun, cost every start 0.4 ms (docs/benchmarks.md). The TLS settings
// (CA, certificate, key) are loaded once per client and shared by its
// connections. A connection's operations run on the calling thread; abort()
// is the one call another thread may make.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "ddprun/launcher/etcd/etcd_client.hpp"
#include "ddprun/proto/errors.hpp"

namespace ddprun::launcher::etcd::detail {

using Clock = std::chrono::steady_clock;

// Why one member did not serve a request, as a short phrase
// ("connection refused", "TLS handshake failed: certificate verify failed");
// the client collects one per member into EtcdUnavailable's line.
class MemberFailure : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct HttpAnswer {
  unsigned status = 0;
  std::string body;
};

// "host:port" ("[v6]:port"), for messages.
inline std::string describeMember(const Member& member) {
  const bool v6 = member.host.find(':') != std::string::npos;
  return (v6 ? "[" + member.host + "]" : member.host) + ":" + std::to_string(member.port);
}

// An answer in which etcd refused a call for good (a bad request, a lease
// that does not exist): no other member would answer otherwise. `code` is
// the gRPC status code the gateway reports (5: not found).
class GatewayError : public StoreError {
 public:
  GatewayError(const std::string& message, int grpc_code) : StoreError(message), code(grpc_code) {}
  int code;
};

// Reads an answer: nothing when it is a success; the member's reason when
// it cannot serve now (no leader, overloaded, timed out: try another
// member); throws GatewayError when the call itself was refused. An error
// can also come with status 200, inside a streamed answer.
std::optional<std::string> checkAnswer(const Member& member, const std::string& target,
                                       const HttpAnswer& answer);

// "etcd at <members>: no member served <target> (<member>: <why>; ...)".
std::string noMemberServed(const std::string& members, const std::string& target,
                           const std::vector<std::string>& failures);

// The end of the key range holding every key with `prefix` (etcd's
// range_end): the prefix with its last byte below 0xff incremented.
std::string prefixEnd(const std::string& prefix);

// The TLS module, loaded, with the client's CA, certificate and key in its
// context: one per client, shared by its connections (loading the files is
// most of a new connection's cost).
struct TlsContext;
// nullptr without TLS. Throws ConfigError when the module or a TLS file
// cannot be loaded.
std::shared_ptr<TlsContext> loadTlsContext(const ClientOptions& options);

class Connection {
 public:
  Connection() = default;
  virtual ~Connection() = default;
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Resolves, connects and (with TLS) handshakes before `deadline`.
  // Throws MemberFailure.
  virtual void open(Clock::time_point deadline) = 0;
  // One POST and its whole answer, before `deadline`. Throws MemberFailure.
  virtual HttpAnswer post(const std::string& target, const std::string& body,
                          Clock::time_point deadline) = 0;
  // After post(): the answer was read whole and the member keeps the
  // connection open (HTTP/1.1 keep-alive), so another request may use it.
  virtual bool reusable() const = 0;
  // For an idle connection: the member closed it (or sent bytes nobody asked
  // for) since its last answer, so it must not carry another request. A
  // poll, no blocking.
  virtual bool closedWhileIdle() const = 0;

  // A streaming POST: sends it and reads the answer's header before
  // `deadline`; returns the status. With a status other than 200 the body
  // is read whole and returned in `error_body`. Throws MemberFailure.
  virtual unsigned startStream(const std::string& target, const std::string& body,
                               Clock::time_point deadline, std::string& error_body) = 0;
  // Reads more of the streamed (chunked) body, handing each piece of it to
  // `on_bytes`; before `deadline` when there is one (a watch's first answer),
  // else for as long as the member is silent. false: the body ended. Throws
  // MemberFailure when the connection breaks or was aborted.
  virtual bool readStream(std::optional<Clock::time_point> deadline,
                          const std::function<void(std::string_view)>& on_bytes) = 0;

  // Any thread: closes the socket, so that the operation running on the
  // owning thread (or the next one) fails at once.
  virtual void abort() = 0;
};

// A connection to `member`, not yet open (no I/O): over the TLS module when
// `tls` (from loadTlsContext) is set, else plain HTTP.
std::unique_ptr<Connection> newConnection(const ClientOptions& options, const Member& member,
                                          const std::shared_ptr<TlsContext>& tls);
// The TLS module's connection (etcd_tls_client.cpp).
std::unique_ptr<Connection> newTlsConnection(const Member& member,
                                             const std::shared_ptr<TlsContext>& tls);

// Reading etcd's JSON (etcd_client.cpp). 64-bit numbers come as strings and
// default values are left out (0). Throw StoreError on a bad number.
std::int64_t int64Field(const nlohmann::json& object, const char* name);
std::int64_t headerRevision(const nlohmann::json& answer);
KeyValue keyValueFromJson(const nlohmann::json& kv);

}  // namespace ddprun::launcher::etcd::detail

// A client of etcd's v3 API through its JSON gateway (POST /v3/... with JSON
// bodies, keys and values base64-encoded, 64-bit numbers as strings), over
// HTTP or HTTPS with Boost.Beast. Why the gateway and not gRPC: Beast and
// OpenSSL are already the project's dependencies, the gateway is served by
// every etcd 3.4+ member on its client port, and the few calls a rendezvous
// needs (range, put, txn, leases, one watch stream) are plain JSON.
//
// The cluster is a list of members; every call goes to the member that
// answered last and fails over to the next on a connection error, a timeout,
// or an answer that says the member cannot serve (no leader, not yet
// started). A call throws EtcdUnavailable only when no member served it,
// with one line naming each member and why.
//
// Owns no thread. Owns the idle HTTP/1.1 connections between calls, kept
// alive per member: a call takes one (or opens one when none is idle) and
// gives it back once its answer is read whole, so a call usually costs one
// round trip and no connect or TLS handshake. Calls from several threads
// each get their own connection; only the idle list is shared, under a
// mutex. A Watch owns one connection for as long as it streams.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "ddprun/proto/errors.hpp"

namespace ddprun::launcher::etcd {

namespace detail {
class Connection;
struct TlsContext;
}  // namespace detail

// No member of the cluster served a call (all unreachable, refused the TLS
// handshake, or without quorum). The message is one line.
class EtcdUnavailable : public NetworkError {
 public:
  using NetworkError::NetworkError;
};

struct Member {
  std::string host;
  std::uint16_t port = 2379;
};

struct ClientOptions {
  std::vector<Member> members;  // at least one
  bool tls = false;             // protocol=https
  std::string ca_file;          // PEM; empty with tls: the system's CAs
  std::string cert_file;        // PEM client certificate, for client-cert auth
  std::string key_file;         // its private key
  // The TLS module's path; empty: the one installed beside the running
  // executable (ddprun's own; other programs, such as tests, name it).
  std::string tls_module;
  // One member's deadline for one call, connect and TLS handshake included.
  std::chrono::milliseconds request_timeout{5'000};
};

// Parses "host1:2379,host2:2379" (a port defaults to 2379; IPv6 as [addr]:port).
// Throws ConfigError naming `what` and the bad entry.
std::vector<Member> parseMembers(const std::string& what, const std::string& list);

struct KeyValue {
  std::string key;
  std::string value;
  std::int64_t create_revision = 0;
  std::int64_t mod_revision = 0;
  std::int64_t lease = 0;

  bool operator==(const KeyValue&) const = default;
};

struct Range {
  std::vector<KeyValue> kvs;  // in key order
  std::int64_t revision = 0;  // the store's revision the range was read at
};

// One condition of a transaction: the key's create or mod revision equals
// `revision` (0 for create: the key does not exist).
struct Compare {
  enum class Target { kCreateRevision, kModRevision };
  std::string key;
  Target target = Target::kModRevision;
  std::int64_t revision = 0;
};

// One operation of a transaction.
struct Operation {
  enum class Kind { kPut, kDelete, kDeletePrefix };
  Kind kind = Kind::kPut;
  std::string key;
  std::string value;       // kPut
  std::int64_t lease = 0;  // kPut: 0 for none
};

struct TxnResult {
  bool succeeded = false;
  std::int64_t revision = 0;  // the store's revision after the transaction
};

struct WatchEvent {
  enum class Type { kPut, kDelete };
  Type type = Type::kPut;
  KeyValue kv;  // for kDelete: key and mod_revision only
};

class Client {
 public:
  // No I/O. Throws ConfigError when a TLS file cannot be loaded.
  explicit Client(ClientOptions options);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // "host:port,host:port", for messages.
  std::string describe() const;
  const ClientOptions& options() const { return options_; }

  Range get(const std::string& key);
  // kSerializable: the answering member's own copy, without a quorum round
  // trip; it may be a little behind, which a watch from its revision repairs.
  enum class Read { kLinearizable, kSerializable };
  Range getPrefix(const std::string& prefix, Read read = Read::kLinearizable);
  std::int64_t put(const std::string& key, const std::string& value, std::int64_t lease = 0);
  // All `compares` hold: `success` runs; else `failure` does.
  TxnResult txn(const std::vector<Compare>& compares, const std::vector<Operation>& success,
                const std::vector<Operation>& failure = {});

  // A lease of `ttl` (etcd rounds it up to its own minimum); its id.
  std::int64_t grantLease(std::chrono::seconds ttl);
  // Renews the lease once. false: the lease no longer exists (expired or
  // revoked), so every key it held is gone.
  bool keepAlive(std::int64_t lease);
  void revokeLease(std::int64_t lease);
  // etcd's own account of a lease (LeaseTimeToLive, answered by the leader):
  // whole seconds left, rounded toward zero, and the TTL it was granted;
  // nullopt when the lease no longer exists.
  struct LeaseTime {
    std::int64_t ttl = 0;
    std::int64_t granted_ttl = 0;
    bool operator==(const LeaseTime&) const = default;
  };
  std::optional<LeaseTime> timeToLive(std::int64_t lease);

  // The member that served the last call, as an index into options().members.
  std::size_t currentMember() const { return current_.load(); }

  // How many connections the client's calls have opened (a Watch's own are
  // not counted): with keep-alive, one per call running at once, not one
  // per call.
  std::size_t connectionsOpened() const { return connections_opened_.load(); }

  // Internal to the client: one POST to /v3/<path> with a JSON body, failed
  // over between members; returns the answer's JSON text.
  std::string post(const std::string& path, const std::string& body);
  // Internal: a new, unopened connection to member `index` (a Watch's).
  std::unique_ptr<detail::Connection> newConnection(std::size_t index);

 private:
  struct IdleConnections;
  // One POST to member `index` on an idle connection or a new one. Throws
  // detail::MemberFailure.
  std::string postTo(std::size_t index, const std::string& target, const std::string& body);
  // An idle connection to member `index` the member has not closed, or nullptr.
  std::unique_ptr<detail::Connection> takeIdle(std::size_t index);
  void giveBack(std::size_t index, std::unique_ptr<detail::Connection> connection);
  std::unique_ptr<detail::Connection> openConnection(
      std::size_t index, std::chrono::steady_clock::time_point deadline);

  ClientOptions options_;
  std::shared_ptr<detail::TlsContext> tls_;
  std::unique_ptr<IdleConnections> idle_;
  std::atomic<std::size_t> current_{0};
  std::atomic<std::size_t> connections_opened_{0};
};

// A watch of every key under a prefix, from a revision on: one streaming
// POST /v3/watch. run() blocks on the calling thread, handing each batch of
// events to `on_events` in revision order, until cancel() (any thread), or
// until the stream breaks, when it throws EtcdUnavailable (the caller
// re-watches from the revision after the last one it saw, on any member).
// Throws WatchCompacted when `start_revision` was compacted away (the caller
// re-reads the prefix). run() owns the stream and its connection, on its
// stack; cancel() reaches them only while run() has them attached, so a
// cancel() before, during or after run(), or the destructor's, never touches
// a connection that is gone.
class WatchCompacted : public Error {
 public:
  using Error::Error;
};

class Watch {
 public:
  Watch(Client& client, std::string prefix, std::int64_t start_revision);
  ~Watch();
  Watch(const Watch&) = delete;
  Watch& operator=(const Watch&) = delete;

  // `on_events(events, revision)`: `revision` is the store's revision the
  // batch brings the watcher up to.
  using EventHandler = std::function<void(const std::vector<WatchEvent>&, std::int64_t revision)>;
  // `on_created(revision)`, if given, once the member has created the watch,
  // with the store's revision then: a watch from 0 ("from now") sees every
  // change after it.
  void run(const EventHandler& on_events,
           const std::function<void(std::int64_t revision)>& on_created = {});
  // Any thread: run() returns soon (without throwing); later run() calls at once.
  void cancel();
  // Any thread: the member (its index in the client's) that created the
  // watch; nullopt before one has.
  std::optional<std::size_t> createdOn();

 private:
  struct Stream;
  // Makes a stream the one cancel() aborts for as long as the attachment
  // lives (etcd_watch.cpp).
  class Attachment;
  bool cancelled();
  void streamEvents(Stream& stream, const EventHandler& on_events);
  // One read of the stream; false when it ended or the watch was cancelled.
  bool readOnce(Stream& stream, std::optional<std::chrono::steady_clock::time_point> deadline,
                const EventHandler& on_events);
  void handleMessage(Stream& stream, const std::string& text, const EventHandler& on_events);

  Client& client_;
  std::string prefix_;
  std::int64_t start_revision_;
  std::function<void(std::int64_t)> on_created_;  // set by run()
  std::mutex mutex_;
  bool cancelled_ = false;
  Stream* stream_ = nullptr;               // the attached stream, for cancel(); under mutex_
  std::optional<std::size_t> created_on_;  // under mutex_
};

// The base64 text etcd's JSON uses for bytes (OpenSSL's encoder).
std::string toBase64(const std::string& bytes);
// Throws Error naming the text when it is not base64.
std::string fromBase64(const std::string& text);

}  // namespace ddprun::launcher::etcd

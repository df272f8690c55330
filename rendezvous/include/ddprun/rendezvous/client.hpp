// A blocking TCPStore client for ddprun's own use (the launcher's rendezvous
// and tests). Speaks the 2.2+ dialect (VALIDATE, PING), so it works against
// ddprund and against PyTorch 2.5+ servers.
//
// Owns one socket. Not thread-safe: one thread at a time, like c10d's client
// with its operation lock; only interrupt() may be called from another
// thread. Every call has a deadline; failures throw NetworkError
// (connection), TimeoutError (deadline) or StoreError (protocol).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ddprun::proto {
struct Request;
}

namespace ddprun::rdzv {

class StoreClient {
 public:
  using Duration = std::chrono::milliseconds;
  // kRetry: a refused connection is tried again, with backoff, until the
  // timeout (the server may not be up yet). kOnce: one attempt, for a tool
  // that asks a running server and should say at once that none is there.
  enum class Connect { kRetry, kOnce };

  // Connects (within `timeout`), then validates and pings.
  StoreClient(const std::string& host, std::uint16_t port, Duration timeout,
              Connect connect = Connect::kRetry);
  ~StoreClient();
  StoreClient(const StoreClient&) = delete;
  StoreClient& operator=(const StoreClient&) = delete;

  // The default deadline of every later call.
  void setTimeout(Duration timeout) { timeout_ = timeout; }

  void set(std::string_view key, std::string_view value);
  // Waits for the key (up to the timeout), then reads it.
  std::string get(std::string_view key);
  // Asks the rendezvous a read-only question (proto::rendezvous::queryKey):
  // a plain GET, with no WAIT, since the answer is never stored.
  std::string query(std::string_view key);
  std::int64_t add(std::string_view key, std::int64_t delta);
  std::string compareSet(std::string_view key, std::string_view expected, std::string_view desired);
  bool check(const std::vector<std::string>& keys);
  // Throws TimeoutError if the keys do not all exist within `timeout`.
  void wait(const std::vector<std::string>& keys, std::optional<Duration> timeout = std::nullopt);
  bool deleteKey(std::string_view key);
  std::int64_t numKeys();
  void append(std::string_view key, std::string_view value);
  std::vector<std::string> multiGet(const std::vector<std::string>& keys);
  void multiSet(const std::vector<std::string>& keys, const std::vector<std::string>& values);
  std::vector<std::string> listKeys();
  void ping();
  // ping() in two halves, for a caller that waits for one answer past a
  // timeout (a stalled server, a cut link): sendPing() sends it; awaitPing()
  // waits up to `timeout` for its echo, and may be called again after a
  // TimeoutError (the echo is 4 bytes, one segment: it comes whole or not).
  void sendPing();
  void awaitPing(Duration timeout);
  // Any thread: the call blocked on this client, if any, and every later one
  // fail at once with NetworkError (the socket is shut down, not closed, so
  // the descriptor stays valid for the thread using it).
  void interrupt();
  // This end's IP address as the server sees it routed (getsockname), e.g.
  // the address other nodes can reach this host at; a link-local IPv6
  // address with its zone ("fe80::12%eth0").
  std::string localAddress() const;

 private:
  void connectWithRetry(const std::string& host, std::uint16_t port, Duration timeout,
                        Connect connect);
  void send(const proto::Request& request);
  void sendAll(std::string_view bytes);
  void expectPingEcho(std::uint32_t nonce, std::chrono::steady_clock::time_point deadline);
  void recvExact(char* data, std::size_t size, std::chrono::steady_clock::time_point deadline);
  std::uint8_t recvU8();
  std::int64_t recvI64();
  std::string recvBytes();
  std::chrono::steady_clock::time_point deadline() const;

  int fd_ = -1;
  Duration timeout_;
  std::string peer_;  // "host:port", for messages
  std::string out_;   // reused request buffer
};

}  // namespace ddprun::rdzv

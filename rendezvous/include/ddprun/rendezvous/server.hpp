// A c10d-TCPStore-compatible store server: every PyTorch client dialect from
// 1.13 to 2.10+, on Boost.Asio.
//
// Owns the listening socket, `threads` io_contexts each run by one thread it
// starts, every client session, and the store state. Connections are spread
// over the threads round-robin; the store state is shared under one lock, so
// commands stay atomic and totally ordered as in PyTorch's servers.
// Construct, start(), then stop() (or destroy) from one controlling thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ddprun/proto/tcpstore_wire.hpp"
#include "ddprun/rendezvous/memory_budget.hpp"
#include "ddprun/rendezvous/rendezvous_service.hpp"

namespace ddprun::metrics {
class Exposition;
}

namespace ddprun::rdzv {

struct ServerOptions {
  std::string host;            // empty: every address (IPv6 dual-stack, else IPv4)
  std::uint16_t port = 29400;  // 0: an ephemeral port, see Server::port()
  int threads = 1;
  proto::Limits limits;
  proto::Dialect legacy_dialect = proto::Dialect::Legacy113;  // or Legacy21
  std::chrono::milliseconds request_timeout{30'000};
  // The agent whose process embeds this server as its job's rendezvous ("":
  // a ddprund of its own); members learn it with every round.
  std::string rendezvous_host_agent;
  // With rendezvous_host_agent: that agent's run, the only one it serves. A
  // join of another run is refused, saying which run holds the endpoint:
  // two jobs that chose one endpoint must not meet (docs/slurm.md).
  std::string rendezvous_run_id;
  // When set, agents must prove they hold this token to join (see
  // token_file.hpp); the workers' store commands stay unauthenticated.
  std::string token;
  // What the store may hold in all (MemoryBudget): a client's write past it
  // is refused and its connection closed; what is stored stays. No reply
  // may carry more than limits.max_request_bytes.
  std::size_t max_memory_bytes = MemoryBudget::kDefaultBytes;
  // An open run with no agent connected is forgotten after this long.
  std::chrono::milliseconds idle_run_timeout = RendezvousService::kDefaultIdleRunTimeout;
  // A closed run is forgotten this long after it closed.
  std::chrono::milliseconds run_retention = RendezvousService::kDefaultRunRetention;
  // RendezvousService::Options::event_acks: false only to test newer agents
  // against a rendezvous that predates acks.
  bool event_acks = true;
};

struct ServerStats {
  std::size_t connections = 0;
  std::size_t keys = 0;  // in the default key space
  std::size_t waiting_clients = 0;
  std::vector<int> active_per_thread;  // connections that have sent a request
};

class Server {
 public:
  // Binds and listens; throws NetworkError naming the address on failure.
  explicit Server(ServerOptions options);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  std::uint16_t port() const;
  std::string listenAddress() const;  // e.g. "[::]:29400"

  // Starts the threads and begins accepting. Returns at once.
  void start();
  // Stops accepting, closes every connection, joins the threads. Idempotent.
  void stop();

  ServerStats stats() const;
  // ddprund's families for a scrape (connections, requests, latency, keys,
  // bytes, waiters, the rendezvous; README "Metrics"). Any thread, while the
  // server runs: the sessions' counts without a lock, the rest under the
  // store lock, taken once.
  void collectMetrics(metrics::Exposition& out) const;
  // How many agents of elastic run `run_id` hold a connection to this
  // server, agent `besides` not counted.
  std::size_t agentsConnected(std::string_view run_id, std::string_view besides = {}) const;

  // Empties the key space clients are served from ("" by default), e.g.
  // between two attempts of a job whose workers do not prefix their keys.
  void clearKeySpace(std::string_view name = "");

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ddprun::rdzv

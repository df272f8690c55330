// Static rendezvous across nodes (torchrun's --rdzv-backend=static with
// --nnodes=N --node-rank=R --master-addr --master-port; see
// docs/torchrun-contract.md §6.2, §6.5, §6.6): the node with rank 0 hosts the
// store, every agent derives its ranks from its --node-rank, and an exit
// barrier keeps the store up until every node is done.
//
// Owns, on node 0 only, the embedded store server (bound to every address on
// master_port, its own Asio threads) that the agents and all workers of the
// job use (TORCHELASTIC_USE_AGENT_STORE=True), and on every node one blocking
// StoreClient to master_addr:master_port. All methods are called from one
// thread, the agent's (join, then beforeAttempt per attempt, then
// exitBarrier); the server is stopped when the object is destroyed.
//
// Agent keys live under "/ddprun/<run_id>/static/", in the same key space as
// the workers' keys (every client is served from the default key space).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ddprun/proto/env_contract.hpp"

namespace ddprun::rdzv {
class Server;
class StoreClient;
}  // namespace ddprun::rdzv

namespace ddprun::launcher {

struct StaticRendezvousOptions {
  int node_rank = 0;
  int nnodes = 1;
  int nproc_per_node = 1;
  std::string master_addr = "127.0.0.1";
  // Node 0 may pass 0 (an ephemeral port, see port()); other nodes need the real one.
  std::uint16_t master_port = 29500;
  std::string run_id = "none";
  std::string role = "default";
  // Bounds join() (connecting included) and each beforeAttempt() barrier;
  // torchrun's static "timeout" rdzv-conf key (900 s by default).
  std::chrono::milliseconds join_timeout{900'000};
  std::string hostname;    // for messages; empty: gethostname()
  int server_threads = 1;  // node 0's store threads
};

class StaticRendezvous {
 public:
  using Duration = std::chrono::milliseconds;

  // Checks the options (ConfigError) and, on node 0, binds and starts the
  // store (NetworkError naming the address when the port is taken). Does not
  // contact other nodes.
  explicit StaticRendezvous(StaticRendezvousOptions options);
  ~StaticRendezvous();
  StaticRendezvous(const StaticRendezvous&) = delete;
  StaticRendezvous& operator=(const StaticRendezvous&) = delete;

  // Connects to the store (retrying while node 0 is not up yet), publishes
  // this node and waits until all nnodes have joined. Returns this node's
  // group: group_rank, world sizes, master_addr/port of the store, run id,
  // role, use_agent_store. Throws TimeoutError naming the missing node ranks,
  // or ConfigError for a node rank claimed twice or an --nproc-per-node that
  // differs between nodes.
  proto::WorkerEnv join();

  // Empties the workers' store before attempt `attempt` (restarts only;
  // attempt 0 is a no-op: the store holds nothing but agent keys then).
  // Multi-node: a barrier; node 0 clears only once every node has stopped its
  // workers and reached the same attempt, so no live worker loses its keys.
  // Each node must therefore call it for every restart; a node that never
  // gets there makes the others throw TimeoutError after the join timeout.
  void beforeAttempt(int attempt);

  // Every node calls this once its workers are done, failed or not. Returns
  // when all nodes have arrived; node 0 returns last, after every other node
  // has acknowledged, so no agent or worker loses the store early. Throws
  // TimeoutError naming the missing node ranks.
  void exitBarrier(Duration timeout);

  // The store's port: master_port, or the ephemeral one node 0 was given.
  std::uint16_t port() const { return port_; }
  bool hostsStore() const { return server_ != nullptr; }

 private:
  using TimePoint = std::chrono::steady_clock::time_point;

  std::string key(const std::string& suffix) const;
  // "<name>/<rank>" for ranks first..nnodes-1.
  std::vector<std::string> perNodeKeys(const std::string& name, int first) const;
  void connect(TimePoint deadline);
  void claimNodeRank();
  void checkNodes(const std::vector<std::string>& values) const;
  void waitForNodes(const std::string& name, int first, TimePoint deadline,
                    const std::string& what);
  std::string timeoutMessage(const std::string& name, int first, const std::string& what);
  proto::WorkerEnv groupEnv() const;

  StaticRendezvousOptions options_;
  std::uint16_t port_ = 0;
  std::unique_ptr<rdzv::Server> server_;       // node 0 only
  std::unique_ptr<rdzv::StoreClient> client_;  // after join()
};

}  // namespace ddprun::launcher

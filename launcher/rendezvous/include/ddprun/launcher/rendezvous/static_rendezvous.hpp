// Static rendezvous across nodes (torchrun's --rdzv-backend=static with
// --nnodes=N --node-rank=R; docs/torchrun-contract.md §6.2): the node with rank 0
// hosts the store at the endpoint (--rdzv-endpoint, else --master-addr:
// --master-port), every agent derives its ranks from its --node-rank, a
// barrier empties the store before each restart, and an exit barrier keeps
// the store up until every node is done.
//
// Owns, on node 0 only, the embedded store server (bound to every address on
// the endpoint's port, its own Asio threads) that the agents and all workers
// of the job use, and on every node one blocking StoreClient to the endpoint.
// As a Rendezvous: nextGroup() runs on the agent's waiter thread, finishJob()
// on main's after it; cancelWait() may come from any thread. The protocol
// steps (join, beforeAttempt, exitBarrier) are public for tests; they run on
// one thread at a time. The server stops when the object is destroyed.
//
// Agent keys live under "ddprun/static/<run id>/" (rendezvous_protocol.hpp),
// in the same key space as the workers' keys.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "ddprun/launcher/core/rendezvous.hpp"
#include "ddprun/launcher/rendezvous/clock_sync.hpp"

namespace ddprun::rdzv {
class Server;
class StoreClient;
}  // namespace ddprun::rdzv

namespace ddprun::launcher {

class StoreWatch;
class WaitNotice;

struct StaticRendezvousOptions {
  int node_rank = 0;
  int nnodes = 1;
  int nproc_per_node = 1;
  // The store's address: the endpoint. Node 0 may pass port 0 (an ephemeral
  // port, see port()); other nodes need the real one.
  std::string host = "127.0.0.1";
  std::uint16_t port = 29500;
  std::string run_id = "none";
  // Bounds join() (connecting included) and each beforeAttempt() barrier;
  // torchrun's static "timeout" rdzv-conf key (900 s by default).
  std::chrono::milliseconds join_timeout{900'000};
  // How long finishJob() keeps waiting for the other nodes (torchrun: 300 s).
  std::chrono::milliseconds exit_barrier_timeout{300'000};
  // How long node 0 may be silent before it counts as lost
  // (keep_alive_interval x keep_alive_max_attempt).
  std::chrono::milliseconds keep_alive_bound{15'000};
  std::string hostname;    // for messages; empty: gethostname()
  int server_threads = 1;  // node 0's store threads
};

class StaticRendezvous final : public Rendezvous {
 public:
  using Duration = std::chrono::milliseconds;

  // Checks the options (ConfigError) and, on node 0, binds and starts the
  // store (NetworkError naming the address when the port is taken). Does not
  // contact other nodes.
  explicit StaticRendezvous(StaticRendezvousOptions options);
  ~StaticRendezvous() override;
  StaticRendezvous(const StaticRendezvous&) = delete;
  StaticRendezvous& operator=(const StaticRendezvous&) = delete;

  std::string describe() const override;
  // The first call joins; each later one is the barrier before a restart.
  std::optional<WorkerGroup> nextGroup() override;
  // Over the workers' store (StorePeerChannel), when the group has other nodes.
  std::unique_ptr<PeerChannel> openPeerChannel(const WorkerGroup& group) override;
  void cancelWait() override;
  // Called when node 0 (the store's host) is lost while a group runs.
  void watchGroup(std::function<void(int newer_attempt)> over) override;
  // Node 0 hosts the store: its own clock, at once. The other nodes measure
  // node 0's on the store watch's connection, once each join has formed a
  // group.
  void watchClock(std::function<void(const ClockOffset&)> measured) override;
  bool failureStands(int attempt, bool restart_asked) override;
  // The exit barrier (a timeout is a warning), except after a signal or when
  // no group ever formed. Returns result.exit_code.
  int finishJob(const RunResult& result) override;

  // Connects to the store (retrying while node 0 is not up yet), publishes
  // this node and waits until all nnodes have joined. Returns this node's
  // group, whose attempt is the largest any node proposed (`next_attempt`
  // here: 0 at first, one more than the last after node 0 was lost). Throws TimeoutError naming the
  // missing node ranks (or the store that never came up), or ConfigError for a node rank claimed
  // twice or an --nproc-per-node that differs between nodes.
  WorkerGroup join(int next_attempt = 0);

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

  // The store's port: the endpoint's, or the ephemeral one node 0 was given.
  std::uint16_t port() const { return port_; }
  bool hostsStore() const { return server_ != nullptr; }

 private:
  using TimePoint = std::chrono::steady_clock::time_point;

  std::string key(const std::string& suffix) const;
  std::string storeAddress() const;
  // "<name>/<rank>" for ranks first..nnodes-1.
  std::vector<std::string> perNodeKeys(const std::string& name, int first) const;
  void connect(TimePoint deadline);
  void claimNodeRank();
  void refuseIfUnlikeNodeZero(TimePoint deadline);
  void checkNodes(const std::vector<std::string>& values) const;
  std::string missingForNotice(const std::string& name, int first);
  std::string missingRanks(const std::string& name, int first);
  std::string refusals(const std::string& name, int first);
  void waitForNodes(const std::string& name, int first, TimePoint deadline, Duration timeout,
                    const std::string& waiting_for, const std::string& did_not);
  void waitForKeys(const std::vector<std::string>& keys, WaitNotice& notice);
  std::string timeoutMessage(const std::string& name, int first, const std::string& did_not,
                             Duration timeout);
  WorkerGroup firstGroup(int attempt) const;
  void watchStore();

  StaticRendezvousOptions options_;
  std::uint16_t port_ = 0;
  std::unique_ptr<rdzv::Server> server_;  // node 0 only
  std::mutex client_mutex_;  // guards the pointer: cancelWait() may run on another thread
  std::unique_ptr<rdzv::StoreClient> client_;  // after join()
  std::atomic<bool> cancelled_{false};
  std::optional<WorkerGroup> group_;   // the group nextGroup() returned last
  std::unique_ptr<StoreWatch> watch_;  // nodes but 0: node 0's store, while a group runs
  std::atomic<bool> lost_{false};      // node 0 was lost: the next group joins afresh
  std::mutex over_mutex_;
  std::function<void(int)> over_;
  ClockWatch clock_watch_;
};

}  // namespace ddprun::launcher

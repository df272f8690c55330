// This agent's membership in an elastic (c10d) rendezvous decided by a
// ddprund (or an agent that embeds one): it joins, announcing the workers'
// store it serves, learns each round (its ranks and node 0's store) the
// moment the daemon pushes it, and keeps itself alive. The wire is the
// contract in proto/include/ddprun/proto/rendezvous_protocol.hpp.
//
// Threads: join() and nextRound() run on the agent's waiter thread;
// requestRestart() on the agent's loop; finish() and close() on main's
// thread after the loop; cancelWait() on any. They share the lease
// connection under lease_mutex_, and send only SETs on it, so none of them
// holds it for long. After join(), an event reader thread blocks in a GET for
// the next event on its own connection, and a heartbeat thread sends one every
// keep_alive_interval on a third. The reader hands rounds to nextRound()
// through a condition variable and calls the change callback, so a membership
// change reaches the agent without polling. Destruction leaves the
// rendezvous and joins both threads.
#pragma once

#include <atomic>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "ddprun/proto/rendezvous_protocol.hpp"
#include "ddprun/rendezvous/client.hpp"

namespace ddprun::launcher {

struct ElasticOptions {
  std::string host;  // the rendezvous endpoint
  std::uint16_t port = 29400;
  std::string run_id;
  std::string agent_id;  // unique per agent process
  int local_world_size = 1;
  std::optional<int> node_rank_hint;
  int min_nodes = 1;
  int max_nodes = 1;
  std::chrono::milliseconds join_timeout{600'000};
  std::chrono::milliseconds last_call_timeout{30'000};
  std::chrono::milliseconds keep_alive_interval{5'000};
  int keep_alive_max_attempt = 3;
  // The workers' store this agent serves: its address is local_addr, or the
  // address this host reaches the rendezvous from.
  std::string local_addr;
  std::uint16_t store_port = 0;
};

// One round, as this node takes part in it.
struct ElasticRound {
  std::int64_t round = 0;  // every node's TORCHELASTIC_RESTART_COUNT
  int group_rank = 0;
  int group_world_size = 1;
  int base_rank = 0;  // global rank of local rank 0
  int world_size = 1;
  std::string store_host;  // node 0's workers' store
  std::uint16_t store_port = 0;
};

class ElasticMembership {
 public:
  // No I/O: join() connects.
  explicit ElasticMembership(ElasticOptions options);
  ~ElasticMembership();
  ElasticMembership(const ElasticMembership&) = delete;
  ElasticMembership& operator=(const ElasticMembership&) = delete;

  // Connects (the rendezvous may come up later: it keeps trying until
  // join_timeout, saying so) and joins. false: cancelWait() came first.
  // Throws TimeoutError naming the endpoint.
  bool join();

  // Blocks until a round newer than the last one returned, saying what it
  // waits for. nullopt: the run was closed (the job ended elsewhere) or the
  // wait cancelled. Throws TimeoutError after join_timeout without one
  // (a spare waits as long as the round is full), and Error if the daemon
  // refused the join or was lost.
  std::optional<ElasticRound> nextRound();

  // Called on the reader thread whenever the round returned last is over (a
  // new round, a suspension below min_nodes, or an abort: kAborted). A plain
  // close is not a change: the running workers finish, and the next
  // nextRound() returns nullopt.
  // An empty function unregisters; once that returns, no call is running.
  void onChange(std::function<void(std::int64_t newer_round)> notify);
  static constexpr std::int64_t kAborted = INT64_MAX;
  // The agent whose failure ended the job, once the run was aborted.
  std::optional<std::string> failedOn();
  // Whether the daemon dropped this agent (no heartbeat reached it in time).
  bool dropped();

  // Makes a join() or nextRound() blocked in another thread return. Any thread.
  void cancelWait();

  // This node's workers failed: the whole job moves to a new round.
  void requestRestart();
  // After this node's workers succeeded: reports it and waits until every
  // node of the round has (torchrun's exit barrier), so the workers' store
  // and a daemon this agent hosts stay up for them. The daemon pushes the
  // outcome; nothing polls.
  enum class Finish { kAllDone, kRoundMoved, kClosed, kTimedOut };
  Finish finish(std::chrono::milliseconds timeout);
  // The job is over: every agent is told. `failed`: restarts are spent
  // here, and every other agent stops its workers too.
  void close(bool failed);

  // "host:port" of the rendezvous, for messages.
  std::string endpoint() const;

 private:
  void send(proto::rendezvous::Verb verb, const std::string& value);
  void readEvents();
  bool recordEvent(const proto::rendezvous::Event& event);
  void sendHeartbeats();
  std::string waitingFor();
  std::string timeoutMessage() const;

  ElasticOptions options_;
  std::mutex lease_mutex_;
  std::unique_ptr<rdzv::StoreClient> lease_;  // the connection that joined: the agent's lease
  std::atomic<bool> cancelled_{false};

  std::mutex mutex_;
  std::condition_variable changed_;
  std::optional<ElasticRound> latest_;  // the newest round pushed
  std::int64_t returned_ = -1;          // the round nextRound() returned last
  bool spare_ = false;                  // the round is full: standing by
  bool suspended_ = false;              // the round fell below min_nodes
  bool finished_ = false;               // the daemon said every member of the round is done
  bool closed_ = false;
  bool stopping_ = false;
  std::string error_;
  std::optional<std::string> failed_on_;
  bool dropped_ = false;
  std::mutex notify_mutex_;  // held while notify_ runs; never together with mutex_
  std::function<void(std::int64_t)> notify_;

  std::thread reader_;
  std::thread heartbeat_;
};

}  // namespace ddprun::launcher

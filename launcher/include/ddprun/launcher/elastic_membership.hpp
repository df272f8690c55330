// This agent's membership in an elastic (c10d) rendezvous decided by a
// ddprund: it joins, learns each round's ranks the moment the daemon pushes
// them, keeps itself alive, and hosts or finds the workers' store.
//
// Threads: the caller's (the agent's) thread uses the lease connection
// (join, restart, close, leave, the workers' store address); an event reader
// thread blocks in a GET for the next event on its own connection; a
// heartbeat thread sends one every keep_alive_interval on a third. The reader
// hands rounds to nextRound() through a condition variable and calls the
// change callback, so a membership change reaches the agent without polling.
// Destruction leaves the rendezvous and joins both threads.
#pragma once

#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <thread>

#include "ddprun/rendezvous/client.hpp"
#include "ddprun/rendezvous/server.hpp"

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
  std::string local_addr;  // advertised for the workers' store; empty: as routed
};

// One round, as this node takes part in it.
struct ElasticRound {
  std::int64_t round = 0;  // every node's TORCHELASTIC_RESTART_COUNT
  int group_rank = 0;
  int group_world_size = 1;
  int base_rank = 0;  // global rank of local rank 0
  int world_size = 1;
};

class ElasticMembership {
 public:
  // Connects (retrying until join_timeout: the daemon may start later) and
  // joins. Throws NetworkError/TimeoutError naming the endpoint.
  explicit ElasticMembership(ElasticOptions options);
  ~ElasticMembership();
  ElasticMembership(const ElasticMembership&) = delete;
  ElasticMembership& operator=(const ElasticMembership&) = delete;

  // Blocks until a round newer than the last one returned. nullopt: the run
  // was closed (the job ended elsewhere). Throws TimeoutError after
  // join_timeout without one, and Error if the daemon refused the join.
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

  // Makes a nextRound() blocked in another thread return nullopt. Any thread.
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

  // The workers' MASTER_ADDR:MASTER_PORT for `round`: group rank 0 hosts an
  // empty store for each round and publishes it; the others read it.
  std::pair<std::string, std::uint16_t> workerStore(const ElasticRound& round);

 private:
  void readEvents();
  bool recordEvent(const nlohmann::json& event);
  void sendHeartbeats();
  std::string key(const std::string& verb) const;

  ElasticOptions options_;
  std::unique_ptr<rdzv::StoreClient> lease_;  // agent thread only
  std::unique_ptr<rdzv::Server> worker_store_;
  std::int64_t hosted_round_ = -1;
  bool finished_ = false;  // the daemon said every member of the round is done

  std::mutex mutex_;
  std::condition_variable changed_;
  std::optional<ElasticRound> latest_;  // the newest round pushed
  std::int64_t returned_ = -1;          // the round nextRound() returned last
  bool closed_ = false;
  bool stopping_ = false;
  bool cancelled_ = false;
  std::string error_;
  std::optional<std::string> failed_on_;
  bool dropped_ = false;
  std::mutex notify_mutex_;  // held while notify_ runs; never together with mutex_
  std::function<void(std::int64_t)> notify_;

  std::thread reader_;
  std::thread heartbeat_;
};

}  // namespace ddprun::launcher

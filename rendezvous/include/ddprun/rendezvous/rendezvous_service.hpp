// ddprund's elastic rendezvous, spoken over reserved TCPStore keys so agents
// need nothing but a store client. An agent SETs
//
//   ddprun/rdzv/<run id>/join       {"agent": id, "local_world_size": n,
//                                    "node_rank": r (optional), "min_nodes": a,
//                                    "max_nodes": b, "last_call_timeout_ms": t,
//                                    "keep_alive_timeout_ms": k}
//   ddprun/rdzv/<run id>/heartbeat  <agent id>
//   ddprun/rdzv/<run id>/restart    <agent id>   (its workers failed)
//   ddprun/rdzv/<run id>/leave      <agent id>
//   ddprun/rdzv/<run id>/close      <agent id>   (the job is over)
//   ddprun/rdzv/<run id>/abort      <agent id>   (the job failed there)
//   ddprun/rdzv/<run id>/done       <agent id>   (its workers succeeded)
//
// and reads its events, in order, from ddprun/rdzv/<run id>/events/<agent>/<n>
// for n = 0, 1, ...: a blocking GET (a WAIT) returns the moment the daemon
// writes one, so nothing polls. Events are JSON objects with a "type":
// "round" (group_rank, base_rank, world_size, group_world_size, round),
// "suspended", "spare", "closed" (with "failed_on": agent after an abort),
// "finished" (every member of the round is done: the exit barrier),
// "dropped" (no heartbeat within the keep-alive timeout), "left" (after its
// own leave), or "error" (message).
//
// The connection that joined is the agent's lease: when it drops, the agent
// is lost at once. Liveness is judged by this daemon's monotonic clock only.
//
// Socket-free: the Session calls in with the store lock held; the server's
// timer calls tick() at nextDeadline(). Owns one ElasticRendezvous per run id.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>

#include "ddprun/rendezvous/elastic_rendezvous.hpp"
#include "ddprun/rendezvous/key_space.hpp"

namespace ddprun::rdzv {

class RendezvousService {
 public:
  using Clock = std::chrono::steady_clock;

  static constexpr std::string_view kPrefix = "ddprun/rdzv/";
  static bool isRendezvousKey(std::string_view key) { return key.starts_with(kPrefix); }
  // Where an agent's n-th event is written.
  static std::string eventKey(std::string_view run_id, std::string_view agent, int64_t n);

  // A SET of a rendezvous key by `client`. Returns why the connection must
  // close if the request is malformed; nothing is changed then.
  std::optional<std::string> onSet(ClientId client, std::string_view key, std::string_view value,
                                   Clock::time_point now, KeySpace& keys);
  // The client's connection is gone: the agent it joined as is lost.
  // Returns whether it was an agent's (plain store clients are not).
  bool onDisconnect(ClientId client, Clock::time_point now, KeySpace& keys);
  // Expires silent agents and last calls.
  void tick(Clock::time_point now, KeySpace& keys);
  std::optional<Clock::time_point> nextDeadline() const;

 private:
  struct Run {
    explicit Run(const ElasticSettings& s) : settings(s), rdzv(s) {}
    ElasticSettings settings;
    ElasticRendezvous rdzv;
    std::map<std::string, int64_t, std::less<>> next_event;  // per agent
    std::string aborted_by;      // the agent whose job failure closed the run
    std::set<std::string> done;  // members of done_round whose workers succeeded
    int64_t done_round = -1;
  };
  struct Binding {
    std::string run_id;
    std::string agent;
  };

  std::optional<std::string> join(ClientId client, const std::string& run_id,
                                  std::string_view payload, Clock::time_point now, KeySpace& keys);
  void finishMember(const std::string& run_id, Run& run, const std::string& agent, KeySpace& keys);
  void publish(const std::string& run_id, Run& run, const Events& events, KeySpace& keys);
  void tell(const std::string& run_id, Run& run, const std::string& agent,
            const std::string& event_json, KeySpace& keys);

  std::map<std::string, Run, std::less<>> runs_;
  std::unordered_map<ClientId, Binding> bindings_;
};

}  // namespace ddprun::rdzv

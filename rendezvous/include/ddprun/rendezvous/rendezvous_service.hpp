// ddprund's elastic rendezvous, spoken over reserved TCPStore keys so agents
// need nothing but a store client. The keys, verbs, events and their fields
// are the contract in proto/include/ddprun/proto/rendezvous_protocol.hpp
// (described in docs/rendezvous-protocol.md): an agent SETs a verb key
// (join, heartbeat, restart, leave, close, abort, done) and reads its events,
// in order, with blocking GETs of its event keys, so nothing polls. A round
// event carries node 0's workers' store, announced in its join.
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

#include "ddprun/proto/rendezvous_protocol.hpp"
#include "ddprun/rendezvous/elastic_rendezvous.hpp"
#include "ddprun/rendezvous/key_space.hpp"

namespace ddprun::rdzv {

class RendezvousService {
 public:
  using Clock = std::chrono::steady_clock;

  static bool isRendezvousKey(std::string_view key);

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
    // Each agent's workers' store, from its join: node 0's goes in round events.
    std::map<std::string, std::pair<std::string, std::uint16_t>, std::less<>> stores;
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
  void publishRound(const std::string& run_id, Run& run, const RoundCompleted& round,
                    KeySpace& keys);
  void tell(const std::string& run_id, Run& run, const std::string& agent,
            const proto::rendezvous::Event& event, KeySpace& keys);

  std::map<std::string, Run, std::less<>> runs_;
  std::unordered_map<ClientId, Binding> bindings_;
};

}  // namespace ddprun::rdzv

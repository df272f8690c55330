// One run id's elastic rendezvous, decided in one place: which agents are in
// the current round, in what order, which wait or stand by as spares, and
// when a round completes. torchrun has every agent read, modify and
// compare-and-set one pickled state and poll it every second; here the daemon
// owns the state, so every change is decided once and pushed to the agents.
//
// Socket-free and clock-free: every call takes `now` (the daemon's monotonic
// clock; hosts' clocks are never compared) and returns the events to push.
// Not thread-safe: owned and driven by one thread, or under the store's lock.
//
// Rules (torchrun's, and where we are better: docs/torchrun-contract.md §6.3):
//  - The first round completes at max_nodes, or last_call_timeout after
//    min_nodes have joined.
//  - A round is re-formed at once, and completes at once, when its membership
//    changes: a member is lost (disconnect, or no heartbeat within the
//    keep-alive timeout), a newcomer arrives below max_nodes, or a member asks
//    for a restart. Survivors keep their order; spares fill lost places first,
//    newcomers are appended. Below min_nodes the round waits for joins
//    instead, and every member is told to stop its workers.
//  - Beyond max_nodes an agent waits as a spare and triggers nothing.
//  - A closed run refuses joins; every agent is told once.
//  - Rounds never number below what a joining agent already ran (its
//    last_round), so a restarted rendezvous keeps counting where it stopped.
//  - A restarted rendezvous restores the running round from its members'
//    rejoins: once all are back it continues that round with no event (no
//    worker restarts); a member still missing after the keep-alive timeout
//    is lost as usual, and the others move on to a new round.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace ddprun::rdzv {

struct ElasticSettings {
  int min_nodes = 1;
  int max_nodes = 1;
  std::chrono::milliseconds last_call_timeout{30'000};
  // keep_alive_interval x keep_alive_max_attempt: silence longer than this is death.
  std::chrono::milliseconds keep_alive_timeout{15'000};
};

struct AgentInfo {
  std::string id;                // unique per agent process, e.g. "host:pid"
  int local_world_size = 1;      // workers on that node
  std::optional<int> rank_hint;  // --node-rank, an ordering hint for the first round
  int64_t last_round = -1;       // the newest round it ran: later rounds number after it
};

// A member of a round whose rendezvous was lost, coming back with its
// workers still running.
struct RoundMembership {
  int64_t round = 0;
  int group_rank = 0;
  int group_world_size = 1;
};

// What one agent of a completed round is told.
struct NodeAssignment {
  std::string id;
  int group_rank = 0;  // the node's place in the round
  int base_rank = 0;   // global rank of its local rank 0
  int local_world_size = 1;
};

struct RoundCompleted {
  int64_t round = 0;                  // also every worker's TORCHELASTIC_RESTART_COUNT
  int world_size = 0;                 // all workers of all nodes
  std::vector<NodeAssignment> nodes;  // in group-rank order
  // From the round's first member (or the re-form that began it) to its
  // completion: how long it took to form, for the metrics.
  std::chrono::steady_clock::duration formation{};
};

// The running round lost members and is below min_nodes: these agents stop
// their workers and wait for the next round.
struct RoundSuspended {
  int64_t round = 0;
  std::vector<std::string> waiting;
};

struct RendezvousClosed {
  std::vector<std::string> agents;  // everyone still known, members and spares
};

using RendezvousEvent = std::variant<RoundCompleted, RoundSuspended, RendezvousClosed>;
using Events = std::vector<RendezvousEvent>;

enum class JoinStatus { kMember, kSpare, kClosed, kAlreadyKnown };

class ElasticRendezvous {
 public:
  using Clock = std::chrono::steady_clock;

  explicit ElasticRendezvous(ElasticSettings settings);

  // An agent arrives. Its status says where it was placed; events are what
  // every affected agent must be told (possibly a completed round).
  JoinStatus join(const AgentInfo& agent, Clock::time_point now, Events& events);
  // A member of `membership.round` coming back (the rendezvous was restarted).
  // While no round is known, the round is restored once every member is back
  // (kMember, and no event: nobody restarts). Otherwise it is a join.
  JoinStatus rejoin(const AgentInfo& agent, const RoundMembership& membership,
                    Clock::time_point now, Events& events);
  // Every member that can come back has (a coordinator that took over from
  // state kept elsewhere knows who is alive): a round being restored is
  // finished now rather than at its deadline. No-op when none is.
  Events endRestore(Clock::time_point now);
  // Proof of life; unknown ids are ignored.
  void heartbeat(const std::string& id, Clock::time_point now);
  // The agent's connection dropped or it left: it is gone at once.
  Events lose(const std::string& id, Clock::time_point now);
  // A member's workers failed: the whole job restarts into a new round.
  Events restart(const std::string& id, Clock::time_point now);
  // The job ended (success, or max_restarts spent somewhere): final.
  Events close();
  // Expires silent agents and the last call. Call at nextDeadline() or later.
  Events tick(Clock::time_point now);
  // The rendezvous itself did not run for `stalled` (its process stopped, its
  // host paused): that silence was its own, so every agent is heard from
  // that much later, never later than `now`.
  void excuseStall(Clock::duration stalled, Clock::time_point now);

  // The earliest time tick() has work to do; nullopt if none.
  std::optional<Clock::time_point> nextDeadline() const;

  int64_t round() const { return round_; }
  bool complete() const { return complete_; }
  // A round is being restored from rejoins; its number.
  std::optional<int64_t> restoring() const {
    return restore_ ? std::optional<int64_t>(restore_->round) : std::nullopt;
  }
  bool closed() const { return closed_; }
  std::vector<std::string> members() const;
  std::vector<std::string> spares() const;
  bool knows(const std::string& id) const;
  // When a member or spare was last heard from; nullopt if it is neither.
  std::optional<Clock::time_point> lastSeen(const std::string& id) const;
  // The members back in the round being restored, in group-rank order.
  std::vector<std::string> rejoined() const;

 private:
  struct Agent {
    AgentInfo info;
    Clock::time_point last_seen;
  };

  void addMember(Agent agent, Clock::time_point now, Events& events);
  void finishRestore(Clock::time_point now, Events& events);
  void completeRound(Clock::time_point now, Events& events);
  void reform(Clock::time_point now, Events& events);
  void removeEverywhere(const std::string& id, bool& was_member);
  void orderFirstRound();
  Agent* find(const std::string& id);
  // Members first, then spares; const or not, as `self` is.
  template <typename Self>
  static auto* findIn(Self& self, const std::string& id) {
    for (auto* list : {&self.members_, &self.spares_}) {
      for (auto& agent : *list) {
        if (agent.info.id == id) {
          return &agent;
        }
      }
    }
    return static_cast<decltype(&self.members_.front())>(nullptr);
  }

  ElasticSettings settings_;
  int64_t round_ = 0;
  bool complete_ = false;
  bool ever_completed_ = false;  // the first round is ordered by --node-rank hints
  bool closed_ = false;
  std::vector<Agent> members_;  // rank order once the round is complete
  std::vector<Agent> spares_;   // arrival order
  std::optional<Clock::time_point> last_call_deadline_;
  std::optional<Clock::time_point> forming_since_;  // the incomplete round's start
  int64_t next_round_floor_ = 0;  // no round numbers below this (agents' last_round + 1)

  // A round being restored from rejoins (nothing else is decided meanwhile).
  struct Restore {
    int64_t round = 0;
    int group_world_size = 0;
    std::vector<std::pair<int, Agent>> back;  // group rank, agent
    std::vector<Agent> arrivals;              // plain joins meanwhile, in order
    Clock::time_point deadline;
  };
  std::optional<Restore> restore_;
};

}  // namespace ddprun::rdzv

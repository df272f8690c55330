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
//  - Quarantine (elastic_quarantine.cpp): each restart that re-forms the
//    running round blames the host of the member that asked first (its
//    worker failed first); a host blamed quarantine_after times is left out
//    of the following rounds for quarantine_duration, its agents standing by
//    as spares, as long as min_nodes still holds without it.
//  - A restarted rendezvous restores the running round from its members'
//    rejoins (elastic_restore.cpp): once all are back it continues that
//    round with no event (no worker restarts); a member still missing after
//    the keep-alive timeout is lost as usual, and the others move on to a
//    new round.
//  - Agents that fall silent in the same tick are lost together: one new
//    round, never with a spare that is silent too.
//  - A cut-off rendezvous loses nobody for silence (elastic_cut_off.cpp):
//    when an agent's keep-alive runs out while the rendezvous heard no agent
//    at all for over half the keep-alive timeout (a live one is heard every
//    third of it), the silence is its own, and every agent is held. Held
//    agents are lost only if nobody is heard within cut_off_limit past the
//    keep-alive timeout (the agents give up on it then), or when their
//    connection closes. Once anyone is heard, each held agent has as long
//    again as the silence lasted (at most 120 s, Linux's longest
//    retransmission wait), plus the keep-alive timeout, to be heard
//    (TCP's retransmissions back off, doubling: a connection may resume that
//    much after the link is back); one still silent then is lost.
//  - The rendezvous' own stall (excuseStall) counts against nobody: not
//    against the agents' keep-alive, a last call, or a restore's wait.
//
// Cost: a lookup, a heartbeat, and a join that completes no round are O(1)
// (an index by id); nextDeadline() is O(1), and tick() finds the silent in
// O(1 + their number), since the agents are kept in last-heard order. Only
// what every member must hear (a round completed or re-formed: a member's
// loss, a restart, a newcomer; close), the rare excuseStall(), and a cut-off's
// beginning and end walk the members.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <list>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <variant>
#include <vector>

namespace ddprun::rdzv {

struct ElasticSettings {
  int min_nodes = 1;
  int max_nodes = 1;
  std::chrono::milliseconds last_call_timeout{30'000};
  // keep_alive_interval x keep_alive_max_attempt: silence longer than this is death.
  std::chrono::milliseconds keep_alive_timeout{15'000};
  // How long the agents wait for a silent rendezvous (their join_timeout):
  // as long as it heard none of them, they are held that much past the
  // keep-alive timeout before they are lost (the rendezvous, not they, is
  // cut off).
  std::chrono::milliseconds cut_off_limit{600'000};
  // A host blamed for this many group failures (a worker of its failed
  // first) is quarantined; 0: never.
  int quarantine_after = 3;
  std::chrono::milliseconds quarantine_duration{600'000};
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

// A host was quarantined: `agents`, its agents, stand by until `until`
// (unless the job needs them to keep min_nodes) and are out of `round`, the
// round decided next.
struct HostQuarantined {
  std::string host;
  int failures = 0;  // the group failures it was blamed for
  std::chrono::steady_clock::time_point until;
  int64_t round = 0;
  std::vector<std::string> agents;
};

// A host's quarantine is over; `spares`, its agents still standing by (the
// round was full), are plain spares now. The others took places in a round.
struct QuarantineEnded {
  std::string host;
  std::vector<std::string> spares;
};

// An agent tick() dropped for its silence.
struct Expired {
  std::string id;
  bool was_member = false;  // in the round when it expired (else a spare)
};

using RendezvousEvent = std::variant<RoundCompleted, RoundSuspended, RendezvousClosed,
                                     HostQuarantined, QuarantineEnded>;
using Events = std::vector<RendezvousEvent>;

// kQuarantined: a spare because its host is quarantined (quarantineOf()).
enum class JoinStatus { kMember, kSpare, kQuarantined, kClosed, kAlreadyKnown };

// A host's quarantine as it stands.
struct Quarantine {
  std::string host;
  int failures = 0;  // the group failures it was blamed for
  std::chrono::steady_clock::time_point until;
};

class ElasticRendezvous {
 public:
  using Clock = std::chrono::steady_clock;

  explicit ElasticRendezvous(ElasticSettings settings);
  // It holds references into its own containers: moved (they stay valid),
  // never copied.
  ElasticRendezvous(const ElasticRendezvous&) = delete;
  ElasticRendezvous& operator=(const ElasticRendezvous&) = delete;
  ElasticRendezvous(ElasticRendezvous&&) = default;
  ElasticRendezvous& operator=(ElasticRendezvous&&) = default;

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
  // A quarantine decided elsewhere (the state a deposed etcd coordinator
  // wrote): `quarantine.host` stays out of the rounds until its `until`.
  // Called before its agents are placed.
  void restoreQuarantine(const Quarantine& quarantine);
  // Proof of life; unknown ids are ignored.
  void heartbeat(std::string_view id, Clock::time_point now);
  // The agent's connection dropped or it left: it is gone at once.
  Events lose(std::string_view id, Clock::time_point now);
  // A member's workers failed in `failed_round` (nullopt: it did not say,
  // an older agent): the whole job restarts into a new round, and the
  // member's host is blamed. A restart of a round that is not the running
  // one (a peer's workers failing in turn, once the first failure had
  // re-formed it) changes nothing and blames nobody.
  Events restart(std::string_view id, Clock::time_point now,
                 std::optional<int64_t> failed_round = std::nullopt);
  // The job ended (success, or max_restarts spent somewhere): final.
  Events close();
  // Expires silent agents and the last call. Call at nextDeadline() or later.
  // Silent agents are lost one by one in last-heard order (the one heard
  // from longest ago first); `expired` gets each of them, with whether it
  // was a member when the tick began.
  Events tick(Clock::time_point now, std::vector<Expired>& expired);
  Events tick(Clock::time_point now);
  // The rendezvous itself did not run for `stalled` (its process stopped, its
  // host paused): that silence was its own, so every agent is heard from
  // that much later, never later than `now`.
  void excuseStall(Clock::duration stalled, Clock::time_point now);

  // The earliest time tick() has work to do; nullopt if none.
  std::optional<Clock::time_point> nextDeadline() const;
  // The rendezvous heard nobody and holds its agents (elastic_cut_off.cpp):
  // how many it holds; 0 when it is not cut off.
  std::size_t heldAgents() const;

  int64_t round() const { return round_; }
  bool complete() const { return complete_; }
  // A round is being restored from rejoins; its number.
  std::optional<int64_t> restoring() const {
    return restore_ ? std::optional<int64_t>(restore_->round) : std::nullopt;
  }
  bool closed() const { return closed_; }
  // Members in rank order once the round is complete (else in arrival order),
  // and spares in arrival order. While complete() and round() stay the same,
  // the members do: every change of membership starts a new round.
  std::vector<std::string> members() const;
  std::vector<std::string> spares() const;
  std::size_t memberCount() const { return members_.size(); }
  std::size_t spareCount() const { return spares_.size(); }
  bool knows(std::string_view id) const { return index_.contains(id); }
  bool isMember(std::string_view id) const;
  // Hosts quarantined at `now`, and the one `id`'s host is in, if any.
  std::vector<Quarantine> quarantined(Clock::time_point now) const;
  std::optional<Quarantine> quarantineOf(std::string_view id, Clock::time_point now) const;
  // Hosts whose quarantine tick() has not ended yet (it ends them at their
  // deadline): quarantined(now).size() for a caller with no clock.
  std::size_t quarantinedHosts() const { return quarantine_ends_.size(); }
  // The group failures blamed on `host` since its last quarantine.
  int blamed(std::string_view host) const;
  // When a member or spare was last heard from; nullopt if it is neither.
  std::optional<Clock::time_point> lastSeen(std::string_view id) const;
  // The members back in the round being restored, in group-rank order.
  std::vector<std::string> rejoined() const;

 private:
  struct Agent {
    AgentInfo info;
    Clock::time_point last_seen;
    bool member = false;  // in members_, else in spares_ (or a restore's)
    bool held = false;    // in cut_off_->held, else in heard_ (or a restore's)
    std::string host{};   // agentHost(info.id), set by addHeard(): what failures blame
  };
  // Agents in last-heard order: the front was heard from longest ago, so it
  // is the next to expire. A list, so that a heartbeat moves its agent to the
  // back in O(1) and every reference below stays valid until it is lost.
  using Heard = std::list<Agent>;
  using AgentRef = Heard::iterator;

  // Puts `agent` in `heard` at its last-heard place: the back, unless a
  // caller's clock went back (hand-driven clocks in tests; the timer's `now`
  // is read before the store lock).
  static AgentRef addHeard(Heard& heard, Agent agent);
  static void keepHeardOrder(Heard& heard, AgentRef agent);
  AgentRef admit(Agent agent);  // into heard_ and the index
  JoinStatus place(AgentRef agent, Clock::time_point now, Events& events);
  void loseTogether(std::span<const std::string_view> ids, Clock::time_point now, Events& events);
  void hear(AgentRef agent, Clock::time_point now);
  void addMember(AgentRef agent, Clock::time_point now, Events& events);
  void finishRestore(Clock::time_point now, Events& events);
  void forgetRestoring(std::string_view id);
  void completeRound(Clock::time_point now, Events& events);
  // A cut-off rendezvous (elastic_cut_off.cpp).
  bool cutOff(Clock::time_point now) const;
  void holdAll();
  void heardAgain(Clock::time_point now);
  void unhold(AgentRef agent);
  void reform(Clock::time_point now, Events& events);
  void remove(AgentRef agent);
  void orderFirstRound();
  // Quarantine (elastic_quarantine.cpp).
  struct HostRecord {
    int blamed = 0;                          // failures since its last quarantine
    int failures = 0;                        // what its last quarantine was for
    std::optional<Clock::time_point> until;  // while quarantined
  };
  void blame(AgentRef failed, Clock::time_point now, Events& events);
  bool inQuarantine(const Agent& agent, Clock::time_point now) const;
  int eligibleAgents(Clock::time_point now) const;
  void endQuarantine(const std::string& host);
  void promoteSpares(Clock::time_point now, Events& events);
  void endQuarantinesDue(Clock::time_point now, Events& events);
  void tellQuarantinesEnded(const std::vector<std::string>& hosts, Events& events) const;
  std::optional<Clock::time_point> nextQuarantineEnd() const;

  ElasticSettings settings_;
  int64_t round_ = 0;
  bool complete_ = false;
  bool ever_completed_ = false;  // the first round is ordered by --node-rank hints
  bool closed_ = false;
  Heard heard_;  // every member and spare, but those a cut-off holds
  // Id -> agent; the keys view the ids held in heard_ and cut_off_->held.
  std::unordered_map<std::string_view, AgentRef> index_;
  std::vector<AgentRef> members_;  // rank order once the round is complete
  std::deque<AgentRef> spares_;    // arrival order
  std::optional<Clock::time_point> last_call_deadline_;
  std::optional<Clock::time_point> forming_since_;  // the incomplete round's start
  int64_t next_round_floor_ = 0;  // no round numbers below this (agents' last_round + 1)
  // Hosts ever blamed, by name (agentHost() of their agents' ids), and the
  // ends of the quarantines running, soonest first.
  std::map<std::string, HostRecord, std::less<>> hosts_;
  std::set<std::pair<Clock::time_point, std::string>> quarantine_ends_;

  // A round being restored from rejoins (nothing else is decided meanwhile).
  // Its agents are known to nobody else: they are neither members nor spares
  // until it ends.
  struct Restore {
    int64_t round = 0;
    int group_world_size = 0;
    Heard heard;                                 // everyone below, last-heard order
    std::vector<std::pair<int, AgentRef>> back;  // group rank, agent
    std::vector<AgentRef> arrivals;              // plain joins meanwhile, in order
    Clock::time_point deadline;
  };
  std::optional<Restore> restore_;

  // The rendezvous heard nobody for over half the keep-alive timeout when an
  // agent's ran out: it, not they, is cut off. Its agents are held here,
  // out of heard_, in last-heard order, and none of them expires until
  // `until`.
  struct CutOff {
    Heard held;
    // The last time it heard anyone before the cut (the first cut, while
    // some it held then are still held): what the grace is measured by.
    Clock::time_point since;
    Clock::time_point until;  // the held are lost then
    bool heard = false;       // someone was heard again: the others have until `until`
  };
  std::optional<CutOff> cut_off_;
};

}  // namespace ddprun::rdzv

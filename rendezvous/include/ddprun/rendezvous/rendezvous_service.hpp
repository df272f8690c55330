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
//
// Cost per request: a join, heartbeat, done or store_ready of one agent
// touches that agent only (lookups by id, the exit barrier counted); what
// every member must hear (a round, a loss, the barrier's "finished", close)
// is the only work that walks the members.
#pragma once

#include <chrono>
#include <functional>
#include <list>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>

#include "ddprun/metrics/exposition.hpp"
#include "ddprun/metrics/histogram.hpp"
#include "ddprun/proto/rendezvous_protocol.hpp"
#include "ddprun/proto/rendezvous_status.hpp"
#include "ddprun/rendezvous/elastic_rendezvous.hpp"
#include "ddprun/rendezvous/exit_barrier.hpp"
#include "ddprun/rendezvous/job_record.hpp"
#include "ddprun/rendezvous/key_space.hpp"

namespace ddprun::rdzv {

class RendezvousService {
 public:
  using Clock = std::chrono::steady_clock;

  // An open run none of whose agents holds a connection is forgotten after
  // this long (ddprund --idle-run-timeout). Forgetting is what a restart of
  // the daemon would do to it: agents that come back rejoin it afresh.
  static constexpr std::chrono::seconds kDefaultIdleRunTimeout{3600};
  // At most this many such runs are kept; beyond it the one idle longest is
  // forgotten at once, so joins that go away cannot grow the daemon.
  static constexpr std::size_t kMaxIdleRuns = 1024;
  // A closed run is kept this long (ddprund --run-retention), so `ddprun
  // status` still answers for it, then forgotten with its events; at most
  // kMaxClosedRuns are kept, the one closed longest ago forgotten first, so
  // a daemon that runs for months holds what its recent jobs left only.
  static constexpr std::chrono::seconds kDefaultRunRetention{3600};
  static constexpr std::size_t kMaxClosedRuns = 4096;
  // The `jobs` answer lists at most this many runs (open ones first), and
  // says how many it holds: it stays far below a client's reply limit.
  static constexpr std::size_t kMaxJobsListed = 1000;

  struct Options {
    // The agent whose process serves this rendezvous, told to every member
    // with each round ("" for a ddprund of its own).
    std::string host_agent;
    // When not empty, a join must prove it holds it (challenge, then HMAC).
    std::string token;
    Clock::duration idle_run_timeout = kDefaultIdleRunTimeout;
    Clock::duration run_retention = kDefaultRunRetention;
    // Round events offer acks, and acks drop what was read. false: as a
    // rendezvous before acks (no offer; an ack is an unknown verb, and
    // closes its connection), for the tests of newer agents against it.
    bool event_acks = true;
    // When not empty, the one run served (the host agent's); a join of any
    // other is refused with an error event naming both runs. "": every run
    // (a ddprund).
    std::string served_run;
  };

  RendezvousService() : RendezvousService(Options{}) {}
  explicit RendezvousService(Options options) : options_(std::move(options)) {}

  // Why a rendezvous SET was refused. `close`: the request was malformed or
  // not the connection's to make, and its connection closes. Otherwise (a
  // join without a valid proof of the token) the connection stays open, and
  // reply() tells it why; the agent the join named is never told anything.
  struct Refusal {
    std::string why;
    bool close = true;
  };

  static bool isRendezvousKey(std::string_view key);
  // Whether `key` is a read-only question (proto::rendezvous::isQueryKey).
  static bool isQueryKey(std::string_view key);

  // The answer to a GET of query key `key`, one JSON object (an unknown
  // question: {"error": ...}). Reads only; rendezvous_queries.cpp.
  std::string answer(std::string_view key, Clock::time_point now) const;

  // A SET of a rendezvous key by `client`. Returns why it was refused if the
  // request is malformed, not the requesting agent's to make (every verb but
  // join must come from the connection that joined as that agent of that
  // run), or a join without a valid proof of the token; nothing is changed
  // then, and nothing is written where another client reads.
  std::optional<Refusal> onSet(ClientId client, std::string_view key, std::string_view value,
                               Clock::time_point now, KeySpace& keys);
  // The answer to a GET of `key` that is `client`'s alone, never stored: the
  // nonce of its challenge at its challenge key, the refusal of its join (an
  // error event) at the run's join key. nullopt: the store answers it (an
  // event; a join that was taken reads as nothing).
  std::optional<std::string> reply(ClientId client, std::string_view key) const;
  // The client's connection is gone: the agent it joined as is lost.
  // Returns whether it was an agent's (plain store clients are not).
  bool onDisconnect(ClientId client, Clock::time_point now, KeySpace& keys);
  // Before a GET of `key` when it asks for one run's status, and before a SET
  // of `key` when it is a restart of a run: each agent of that run whose
  // connection `hung_up` says its peer closed is lost now, as if its session
  // had read the close already. An agent whose workers failed asks for a
  // restart, then that question: a node killed at that moment closed its
  // connection before its workers' deaths reset the survivor's, and the
  // session that will read the close may not have run yet. Lost first, it is
  // lost from the round the failure was in, and the restart of that round is
  // stale. Returns whether anyone was lost (the caller then says the
  // rendezvous changed).
  bool loseHungUpAgents(std::string_view key, const std::function<bool(ClientId)>& hung_up,
                        Clock::time_point now, KeySpace& keys);
  // Expires silent agents, last calls and restores.
  void tick(Clock::time_point now, KeySpace& keys);
  // The service did not run for `stalled`: no agent is blamed for it
  // (ElasticRendezvous::excuseStall).
  void excuseStall(Clock::duration stalled, Clock::time_point now);
  std::optional<Clock::time_point> nextDeadline() const;
  // The rendezvous's families for a scrape: jobs, rounds decided and how
  // long they took to form, agents alive, spares, agents lost. Reads only;
  // rendezvous_metrics.cpp.
  void collectMetrics(metrics::Exposition& out) const;

  // Agents of `run_id` whose joining connection is still open, `besides`
  // not counted.
  std::size_t agentsConnected(std::string_view run_id, std::string_view besides = {}) const {
    const auto run = runs_.find(run_id);
    if (run == runs_.end()) {
      return 0;
    }
    const auto self = run->second.agents.find(besides);
    const bool counted = self != run->second.agents.end() && self->second.lease.has_value();
    return run->second.leases - (counted ? 1 : 0);
  }

 private:
  // An agent's event stream: its join's session, the next event's index,
  // and the first one still held (those below it were acknowledged, and
  // dropped).
  struct Stream {
    int64_t session = 0;
    int64_t next = 0;
    int64_t acked = 0;
  };
  // What the service holds of one agent of a run, from its first join on
  // (kept once it is lost: its events stay readable until it joins again).
  // One record per agent, so an agent costs one lookup and one copy of its id.
  struct AgentState {
    Stream stream;                  // its events
    std::optional<ClientId> lease;  // the connection it joined on, while open
    // Its workers' store, from its join: node 0's goes in round events.
    std::string store_host;
    std::uint16_t store_port = 0;
  };
  // Runs waiting to be forgotten, oldest first: since when (idle, or
  // closed), and the run's id. Kept for open runs none of whose agents holds
  // a connection (idle_runs_) and for closed runs (closed_runs_).
  using RunQueue = std::list<std::pair<Clock::time_point, std::string>>;
  struct Run {
    explicit Run(const ElasticSettings& s) : settings(s), rdzv(s) {}
    ElasticSettings settings;
    ElasticRendezvous rdzv;
    StringMap<AgentState> agents;
    std::size_t leases = 0;  // agents whose lease is open
    std::string aborted_by;  // the agent whose job failure closed the run
    ExitBarrier exit_barrier;
    // The running round's places for members other than node 0, held until
    // node 0 says its workers' store is ready (store_ready); the event they
    // share but for their places.
    int64_t held_round = -1;
    std::string held_for;  // node 0 of held_round
    std::vector<NodeAssignment> held;
    proto::rendezvous::Event held_event;
    JobRecord record;                          // what `ddprun status` is told beyond the rounds
    std::optional<RunQueue::iterator> idle;    // its entry while no agent holds a connection
    std::optional<RunQueue::iterator> closed;  // its entry once it is closed
  };
  using Runs = std::map<std::string, Run, std::less<>>;
  struct Binding {
    std::string run_id;
    std::string agent;
  };
  // A nonce handed to a connection for its next join.
  struct Challenge {
    std::string run_id;
    std::string agent;
    int64_t session = 0;
    std::string nonce;
  };
  // A connection's join that was refused for want of a proof: the run it
  // named, and the error event that answers it.
  struct RefusedJoin {
    std::string run_id;
    std::string answer;
  };

  std::string foreignRun(const std::string& run_id) const;
  std::optional<Refusal> join(ClientId client, const std::string& run_id, std::string_view payload,
                              Clock::time_point now, KeySpace& keys);
  std::optional<std::string> verb(ClientId client, const proto::rendezvous::ElasticRequestKey& key,
                                  std::string_view value, Clock::time_point now, KeySpace& keys);
  std::optional<std::string> authorize(ClientId client, const std::string& run_id,
                                       std::string_view verb, std::string_view agent) const;
  std::optional<std::string> challenge(ClientId client, const std::string& run_id,
                                       std::string_view value);
  bool proven(ClientId client, const std::string& run_id,
              const proto::rendezvous::JoinRequest& request);
  // Forgets the runs idle or closed past their bound, or beyond
  // kMaxIdleRuns / kMaxClosedRuns (run_retention.cpp).
  void forgetExpiredRuns(Clock::time_point now, KeySpace& keys);
  void forgetRun(Runs::iterator run, KeySpace& keys);
  // The run's agents' open leases changed: it starts or stops being idle.
  void noteLeases(const std::string& run_id, Run& run, Clock::time_point now);
  // The run may have closed: its retention starts.
  void noteClosed(const std::string& run_id, Run& run, Clock::time_point now);
  // An agent has read its events below ack.read: they are dropped.
  std::optional<std::string> ack(ClientId client, const std::string& run_id, std::string_view value,
                                 KeySpace& keys);
  // Drops `agent`'s events from stream.acked up to (not including) `end`.
  static void dropEvents(const std::string& run_id, const std::string& agent, Stream& stream,
                         int64_t end, KeySpace& keys);
  void openStream(const std::string& run_id, Run& run, const std::string& agent, int64_t session,
                  KeySpace& keys);
  void recordDone(Run& run, const std::string& agent, int64_t round);
  void finishMember(const std::string& run_id, Run& run, const std::string& agent, KeySpace& keys);
  void pushExitBarrier(const std::string& run_id, Run& run, KeySpace& keys);
  void noteLoss(Run& run, const std::string& agent, proto::rendezvous::LossReason reason,
                Clock::time_point now);
  static proto::rendezvous::Event simpleEvent(proto::rendezvous::EventType type,
                                              int64_t round = -1);
  // What the agents are told (rendezvous_publish.cpp).
  void publish(const std::string& run_id, Run& run, const Events& events, Clock::time_point now,
               KeySpace& keys);
  void publishRound(const std::string& run_id, Run& run, const RoundCompleted& round,
                    Clock::time_point now, KeySpace& keys);
  // Tells `node` its place in a round: `event`, with the place filled in.
  void tellPlace(const std::string& run_id, Run& run, const NodeAssignment& node,
                 proto::rendezvous::Event& event, KeySpace& keys);
  void tell(const std::string& run_id, Run& run, const std::string& agent,
            const proto::rendezvous::Event& event, KeySpace& keys);
  // Tells `agent` it stands by, out of `round`, because its host is
  // quarantined (a plain spare when the quarantine is over by `now`).
  void tellQuarantined(const std::string& run_id, Run& run, const std::string& agent, int64_t round,
                       Clock::time_point now, KeySpace& keys);
  void releaseRound(const std::string& run_id, Run& run, const std::string& agent, KeySpace& keys);
  // The agent's lease is open on `client` / closed (returns the connection).
  static void grantLease(Run& run, AgentState& agent, ClientId client);
  static std::optional<ClientId> endLease(Run& run, std::string_view agent);
  // The answers to status questions (rendezvous_queries.cpp).
  std::string jobsAnswer(Clock::time_point now) const;
  std::string statusAnswer(std::string_view run_id, Clock::time_point now) const;
  proto::rendezvous::JobStatus statusOf(const std::string& run_id, const Run& run,
                                        Clock::time_point now) const;
  void describeMembers(const Run& run, Clock::time_point now,
                       proto::rendezvous::JobStatus& status) const;
  static proto::rendezvous::MemberState memberState(const Run& run, const std::string& agent,
                                                    bool starting);
  static proto::rendezvous::MemberStatus memberStatus(const Run& run, const std::string& agent,
                                                      proto::rendezvous::MemberState state,
                                                      Clock::time_point now);

  // What the metrics count across every run; kept since the service started.
  struct Counters {
    Counters();
    std::uint64_t rounds_decided = 0;
    metrics::Histogram formation_seconds;  // written under the store lock only
    std::uint64_t lost_disconnected = 0;   // an open run's agent whose connection closed
    std::uint64_t lost_silent = 0;         // dropped for no heartbeat in time
    std::uint64_t quarantines = 0;         // hosts quarantined
  };

  Options options_;
  Counters counters_;
  std::unordered_map<ClientId, Challenge> challenges_;
  std::unordered_map<ClientId, RefusedJoin> refused_joins_;
  Runs runs_;
  RunQueue idle_runs_;
  RunQueue closed_runs_;
  std::unordered_map<ClientId, Binding> bindings_;
  // Leases whose agent was dropped (no heartbeat in time): their requests
  // are ignored, not refused, so the agent learns of the drop from its
  // events rather than from a closed connection it would take for a lost
  // daemon.
  std::set<ClientId> dropped_leases_;
};

}  // namespace ddprun::rdzv

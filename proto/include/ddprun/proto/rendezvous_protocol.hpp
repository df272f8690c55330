// The rendezvous protocol between ddprun agents and the rendezvous they meet
// at, defined once (as env_contract is for the workers): the reserved keys,
// the verbs an agent writes, the events it reads and their JSON fields. The
// daemon (rendezvous/) and the agent (launcher/) both encode and decode
// through these functions, so a renamed field breaks the build, not a job.
// docs/rendezvous-protocol.md describes the conversation.
//
// Every reserved key is "ddprun/<scope>/<run id>/<rest>":
//   elastic: "ddprun/rdzv/<run id>/<verb>" (SET by an agent; the daemon acts
//            on it and stores nothing) and "ddprun/rdzv/<run id>/events/
//            <agent>/<session>/<n>" (the n-th event of the agent's session,
//            read with a blocking GET; every join starts a new session);
//   static:  "ddprun/static/<run id>/<rest>", plain keys in node 0's store
//            (node, claim, attempt, done, left and error entries);
//   query:   "ddprun/query/<question>", read-only questions to the rendezvous
//            (a plain GET, no WAIT, answered with JSON computed then; nothing
//            is stored, and no command but GET may name one).
// Pure functions; nothing here does I/O.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace ddprun::proto::rendezvous {

// Which rendezvous a reserved key belongs to.
enum class Scope { kElastic, kStatic };

// "ddprun/rdzv/" or "ddprun/static/".
std::string_view scopePrefix(Scope scope);
// "ddprun/<scope>/<run id>/<rest>".
std::string key(Scope scope, std::string_view run_id, std::string_view rest);
// Whether a SET of the key `text` is a request to the elastic rendezvous.
bool isElasticKey(std::string_view text);

// The read-only questions a rendezvous answers. Each answer is one JSON
// object; an unknown question is answered {"error": "<why>"}.
//   kClock: {"steady_ns": <the rendezvous' monotonic clock>}, so an agent
//           can place its own clock against it (offset measured from the
//           round trip, never from hosts' wall clocks).
inline constexpr std::string_view kQueryClock = "clock";
// "ddprun/query/<question>".
std::string queryKey(std::string_view question);
// Whether `key` is a query key.
bool isQueryKey(std::string_view key);
// The question of a query key ("" if `key` is not one).
std::string_view queryOf(std::string_view key);

// What an agent asks of the elastic rendezvous. Each is a SET of
// verbKey(run, verb): kJoin's value is a JoinRequest, kAck's an EventAck,
// every other verb's value is the agent's id (or, for a restart or an
// abort, an AgentReport).
// kChallenge (value: challengeRequest()) asks for a nonce to prove, in the
// join, that this agent holds the job's token (joinProof()); a rendezvous
// started with a token refuses joins without that proof.
// kStoreReady: node 0 of the running round has emptied its workers' store
// (its previous workers are stopped); only then are the other members told
// the round, so no worker of the new round sees the last one's keys.
// kAck (value: encodeEventAck()) says the agent has read its events below
// `read`: the rendezvous drops them. Sent only in a session whose round said
// Event::acks, since an older rendezvous closes the lease on a verb it does
// not know.
enum class Verb {
  kJoin,
  kHeartbeat,
  kRestart,
  kLeave,
  kClose,
  kAbort,
  kDone,
  kChallenge,
  kStoreReady,
  kAck
};

std::string_view verbName(Verb verb);
std::string verbKey(std::string_view run_id, Verb verb);
std::string eventKey(std::string_view run_id, std::string_view agent, std::int64_t session,
                     std::int64_t n);
// Where the rendezvous puts the nonce it challenged an agent's join with.
std::string challengeKey(std::string_view run_id, std::string_view agent, std::int64_t session);
// A challenge's value, "<agent>/<session>", and back (nullopt: malformed).
std::string challengeRequest(std::string_view agent, std::int64_t session);
std::optional<std::pair<std::string, std::int64_t>> parseChallengeRequest(std::string_view value);
// HMAC-SHA256 (hex) of the join's identity and the nonce under the token:
// proves the token without sending it, for this nonce only.
std::string joinProof(std::string_view token, std::string_view run_id, std::string_view agent,
                      std::int64_t session, std::string_view nonce);
// A fresh random nonce (hex).
std::string newNonce();
// Compares two proofs in constant time.
bool sameProof(std::string_view a, std::string_view b);

// A SET key of the elastic scope, split. nullopt: not "ddprun/rdzv/<run>/<x>"
// with a run id of 1..256 bytes. `verb` is nullopt for an unknown verb.
struct ElasticRequestKey {
  std::string run_id;
  std::string verb_text;
  std::optional<Verb> verb;
};
std::optional<ElasticRequestKey> parseElasticKey(std::string_view text);

// A member of a round that lost its rendezvous (an external ddprund that was
// restarted) and is coming back without stopping its workers: the daemon
// restores the round as it was once every member is back, so no worker
// restarts; a member that never comes back is lost as usual.
struct Rejoin {
  std::int64_t round = 0;
  int group_rank = 0;
  int group_world_size = 1;
  bool workers_done = false;  // its workers succeeded: it is in the exit barrier

  bool operator==(const Rejoin&) const = default;
};

// An agent's join. `store_host:store_port` is the workers' store this agent
// serves, announced up front so a round event can carry node 0's.
struct JoinRequest {
  std::string agent;  // unique per agent process; no '/'
  int local_world_size = 1;
  std::optional<int> node_rank;  // --node-rank, an ordering hint
  int min_nodes = 1;
  int max_nodes = 1;
  std::chrono::milliseconds last_call_timeout{30'000};
  std::chrono::milliseconds keep_alive_timeout{15'000};
  std::string store_host;
  std::uint16_t store_port = 0;
  // This agent's join count: its events of this join are under that session.
  std::int64_t session = 0;
  // The newest round this agent ran (-1: none): later rounds number after it,
  // so TORCHELASTIC_RESTART_COUNT never goes back when a rendezvous restarts.
  std::int64_t last_round = -1;
  std::optional<Rejoin> rejoin;
  std::string auth;  // joinProof() for the challenge's nonce; empty without a token
  // --max-restarts, and the restarts this agent has counted so far: what
  // `ddprun status` shows. Optional on the wire (older agents send neither,
  // older rendezvous ignore both).
  std::optional<int> max_restarts;
  int restarts_used = 0;
  // --rdzv-conf quarantine_after and quarantine_seconds: the run's, from its
  // first join, as last_call_timeout is. Optional on the wire (an older
  // agent's run gets the rendezvous' defaults, 3 and 600 s).
  std::optional<int> quarantine_after;
  std::optional<std::chrono::milliseconds> quarantine_duration;

  bool operator==(const JoinRequest&) const = default;
};

// Why a worker failed, as its agent saw it: the failure that made the agent
// ask for a restart, or the root cause of the one that ended the job.
struct WorkerFailureReport {
  std::int64_t round = 0;  // the round (TORCHELASTIC_RESTART_COUNT) it failed in
  int rank = 0;
  int local_rank = 0;
  std::int64_t pid = 0;
  std::optional<int> exit_code;  // it exited with this code,
  std::optional<int> signal;     // or a signal killed it
  std::string reason;            // one line: "exited with code 3", a watchdog's verdict

  bool operator==(const WorkerFailureReport&) const = default;
};

// The value of a restart or abort sent to a rendezvous that takes reports
// (Event::reports): the agent, the restarts it has counted (this one
// included), and the failure behind it. Every other verb's value, and
// what older agents send, is the agent's id alone.
struct AgentReport {
  std::string agent;
  std::optional<int> restarts_used;
  std::optional<WorkerFailureReport> failure;

  bool operator==(const AgentReport&) const = default;
};

std::string encodeAgentReport(const AgentReport& report);

// The value of an ack: this agent has read every event of `session` below
// index `read`, so the rendezvous may drop them.
struct EventAck {
  std::string agent;
  std::int64_t session = 0;
  std::int64_t read = 0;

  bool operator==(const EventAck&) const = default;
};

std::string encodeEventAck(const EventAck& ack);
// nullopt with `why` set when the text is not a well-formed ack (bad JSON,
// a missing or mistyped field, a negative session or index).
std::optional<EventAck> decodeEventAck(std::string_view text, std::string& why);
// A verb's value: a JSON object is a report, anything else the agent's id
// alone (agent ids never start with '{'). nullopt with `why` set: an object
// that is not a well-formed report.
std::optional<AgentReport> decodeVerbValue(std::string_view value, std::string& why);

// The longest timeout a join may carry: 1e9 s, the most ddprun's --rdzv-conf
// allows. The daemon adds it to its steady clock, in nanoseconds; a longer
// one could wrap and expire at once.
inline constexpr std::chrono::milliseconds kMaxJoinTimeout{1'000'000'000'000};

std::string encodeJoin(const JoinRequest& join);
// nullopt with `why` set when the text is not a well-formed join (bad JSON,
// a missing or mistyped field, an empty id, one with '/' or starting with
// '{', bad node counts, negative restart counts, a keep-alive timeout not in
// 1 ms..kMaxJoinTimeout, a last call timeout not in 0..kMaxJoinTimeout).
std::optional<JoinRequest> decodeJoin(std::string_view text, std::string& why);

// What the rendezvous tells one agent, in order.
enum class EventType {
  kRound,      // a round this agent is a member of: run its workers
  kSuspended,  // the running round fell below min nodes: stop and wait
  kSpare,      // the round is full: stand by
  kClosed,     // the job is over (failed_on: the agent whose failure ended it)
  kFinished,   // every member of `round` reported its workers done
  kDropped,    // no heartbeat reached the rendezvous in time: out of the job
  kLeft,       // the answer to this agent's own leave
  kError,      // the rendezvous refused this agent (message)
};

std::string_view eventTypeName(EventType type);

// A quarantined host (ElasticRendezvous: the group failures that started
// there reached quarantine_after): how many, and how long it still lasts,
// by the rendezvous' clock (a duration, never a time: no host's clock is
// compared with another's).
struct HostQuarantine {
  std::string host;
  int failures = 0;
  std::int64_t left_ms = 0;

  bool operator==(const HostQuarantine&) const = default;
};

struct Event {
  EventType type = EventType::kError;
  std::int64_t round = -1;  // kRound, kSuspended, kFinished; kSpare when quarantined
  // kRound: this node's place, and the workers' store (node 0's).
  int group_rank = 0;
  int group_world_size = 0;
  int base_rank = 0;
  int local_world_size = 0;
  int world_size = 0;
  std::string store_host;
  std::uint16_t store_port = 0;
  // kRound: the agent whose process serves this rendezvous ("": a ddprund).
  // Its loss ends the round; a ddprund's does not.
  std::string rendezvous_host;
  std::optional<std::string> failed_on;  // kClosed after an abort
  std::string message;                   // kError
  // kRound: this rendezvous takes restart and abort values as AgentReports.
  // An agent sends its id alone to one that does not say so (an older
  // rendezvous would refuse anything else).
  bool reports = false;
  // kRound: this rendezvous takes acks (Verb::kAck) and drops the events
  // acknowledged. An agent acks nothing in a session whose round did not say
  // so (an older rendezvous would close its lease on the unknown verb).
  bool acks = false;
  // kSpare: this agent stands by because its host is quarantined, and is
  // out of `round` (a member until then: its round is over). An older agent
  // reads a plain spare.
  std::optional<HostQuarantine> quarantine;

  bool operator==(const Event&) const = default;
};

std::string encodeEvent(const Event& event);
// Throws StoreError naming what is wrong when the text is not an event.
Event decodeEvent(std::string_view text);

}  // namespace ddprun::proto::rendezvous

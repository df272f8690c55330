// What a rendezvous tells `ddprun status`, defined once for both sides: the
// read-only questions (GETs of queryKey(question), see
// rendezvous_protocol.hpp) and the JSON of their answers. The daemon encodes
// what it holds; the command decodes it to print a table. Every duration is
// measured by the rendezvous' own monotonic clock at the moment it answers,
// so no host's clock is compared with another's. docs/rendezvous-protocol.md
// §10 lists the fields. Pure functions; nothing here does I/O.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ddprun/proto/rendezvous_protocol.hpp"

namespace ddprun::proto::rendezvous {

// "jobs": the runs the rendezvous holds (JobList), at most a bounded number.
inline constexpr std::string_view kQueryJobs = "jobs";
// "status/<run id>": one run, whole (JobStatus).
std::string statusQuestion(std::string_view run_id);
// The run id a status question names; nullopt if `question` is not one.
std::optional<std::string_view> statusRunOf(std::string_view question);

// The host an agent id names: agents are "<hostname>:<pid>"; an id of
// another shape is its own host.
std::string agentHost(std::string_view agent);

enum class JobState {
  kForming,    // no round yet: waiting for min nodes, or the last call
  kRunning,    // the round is complete; its members run their workers
  kSuspended,  // the running round fell below min nodes: waiting for nodes
  kRestoring,  // a restarted rendezvous waits for the round's members to rejoin
  kClosed,     // the job ended (success, or an agent left it for good)
  kFailed,     // an agent's restarts were spent: the job failed
};

enum class MemberState {
  kWaiting,    // the round is not complete yet
  kStarting,   // told nothing yet: node 0 is emptying the workers' store
  kRunning,    // told its round: its workers run
  kDone,       // its workers of the round succeeded (the exit barrier)
  kRestoring,  // back in the round being restored
  kSpare,      // the round is full: standing by
  kEnded,      // the job is over (closed or failed) before its workers were done
};

// Why the rendezvous lost an agent.
enum class LossReason {
  kConnectionClosed,  // its connection closed: the agent exited or was killed
  kNoHeartbeat,       // silent past keep_alive_interval x keep_alive_max_attempt
  kLeft,              // it said it was leaving (stopped by a signal)
};

std::string_view jobStateName(JobState state);
std::string_view memberStateName(MemberState state);
std::string_view lossReasonName(LossReason reason);

struct MemberStatus {
  std::string agent;
  std::string host;
  std::optional<int> node_rank;  // its group rank, once the round is complete
  std::optional<int> base_rank;  // its first global rank, likewise
  int local_world_size = 1;
  MemberState state = MemberState::kWaiting;
  bool connected = true;                 // its lease (the connection it joined on) is open
  std::optional<std::int64_t> heard_ms;  // since its last heartbeat or join
  int restarts_used = 0;
  std::optional<int> max_restarts;  // unknown for an older agent

  bool operator==(const MemberStatus&) const = default;
};

struct LossStatus {
  std::string agent;
  std::string host;
  std::int64_t round = 0;  // the round it was lost from
  bool was_member = true;  // false: it was a spare
  LossReason reason = LossReason::kConnectionClosed;
  std::int64_t ago_ms = 0;

  bool operator==(const LossStatus&) const = default;
};

struct FailureStatus {
  std::string agent;
  std::string host;
  WorkerFailureReport failure;
  bool ended_job = false;  // an abort (restarts spent), not a restart
  std::int64_t ago_ms = 0;

  bool operator==(const FailureStatus&) const = default;
};

// The answer to status/<run id>.
struct JobStatus {
  std::string run_id;
  JobState state = JobState::kForming;
  std::int64_t round = 0;
  std::optional<std::int64_t> since_round_ms;  // since the last round was decided
  int world_size = 0;                          // of the complete round; 0 otherwise
  int min_nodes = 1;
  int max_nodes = 1;
  std::string rendezvous_host;        // the agent serving it; "" for a ddprund
  std::vector<MemberStatus> members;  // in group-rank order once complete
  std::vector<MemberStatus> spares;   // in arrival order
  int restarts_used = 0;              // counted restarts this rendezvous was asked for
  std::optional<int> restarts_left;   // the fewest any member has left
  std::optional<FailureStatus> last_failure;
  std::vector<LossStatus> losses;        // newest first, the last few only
  std::optional<std::string> failed_on;  // the agent whose abort failed the job
  // Hosts quarantined now, their agents standing by among the spares
  // (ElasticRendezvous); soonest to end first. Absent from an older rendezvous.
  std::vector<HostQuarantine> quarantined;

  bool operator==(const JobStatus&) const = default;
};

// One line of the answer to jobs.
struct JobSummary {
  std::string run_id;
  JobState state = JobState::kForming;
  std::int64_t round = 0;
  int members = 0;
  int spares = 0;
  int world_size = 0;
  std::optional<std::int64_t> since_round_ms;

  bool operator==(const JobSummary&) const = default;
};

// The answer to jobs. A rendezvous lists a bounded number of runs (open ones
// first); `total` is how many it holds, more than jobs.size() when the list
// was capped. Absent from an older rendezvous, which listed every run.
struct JobList {
  std::vector<JobSummary> jobs;
  std::optional<std::int64_t> total;

  bool capped() const { return total && *total > static_cast<std::int64_t>(jobs.size()); }
  bool operator==(const JobList&) const = default;
};

// An answer that is not one: an unknown question, or an unknown run id.
// An unknown question's error starts with kNoSuchQuestion: a client tells
// by it a rendezvous older than its question.
inline constexpr std::string_view kNoSuchQuestion = "no such question: ";
struct QueryError {
  std::string error;

  bool operator==(const QueryError&) const = default;
};

std::string encodeJobStatus(const JobStatus& status);
std::string encodeJobList(const JobList& jobs);
std::string encodeQueryError(const QueryError& error);

// Each throws StoreError naming what is wrong when the text is not that
// answer. Fields a rendezvous may leave out (optional ones) are optional here.
JobStatus decodeJobStatus(std::string_view text);
JobList decodeJobList(std::string_view text);
// nullopt: the text is an answer, not an error.
std::optional<QueryError> decodeQueryError(std::string_view text);

}  // namespace ddprun::proto::rendezvous

#include "ddprun/proto/rendezvous_status.hpp"

#include <algorithm>
#include <array>
#include <climits>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <utility>

#include "ddprun/proto/errors.hpp"
#include "ddprun/proto/json_parse.hpp"
#include "ddprun/proto/json_text.hpp"

namespace ddprun::proto::rendezvous {
namespace {

using nlohmann::json;

constexpr std::string_view kStatusPrefix = "status/";

constexpr std::array<std::pair<JobState, std::string_view>, 6> kJobStates = {{
    {JobState::kForming, "forming"},
    {JobState::kRunning, "running"},
    {JobState::kSuspended, "suspended"},
    {JobState::kRestoring, "restoring"},
    {JobState::kClosed, "closed"},
    {JobState::kFailed, "failed"},
}};

constexpr std::array<std::pair<MemberState, std::string_view>, 7> kMemberStates = {{
    {MemberState::kWaiting, "waiting"},
    {MemberState::kStarting, "starting"},
    {MemberState::kRunning, "running"},
    {MemberState::kDone, "done"},
    {MemberState::kRestoring, "restoring"},
    {MemberState::kSpare, "spare"},
    {MemberState::kEnded, "ended"},
}};

constexpr std::array<std::pair<LossReason, std::string_view>, 3> kLossReasons = {{
    {LossReason::kConnectionClosed, "connection_closed"},
    {LossReason::kNoHeartbeat, "no_heartbeat"},
    {LossReason::kLeft, "left"},
}};

// The JSON field names, once.
namespace field {
constexpr const char* kRunId = "run_id";
constexpr const char* kState = "state";
constexpr const char* kRound = "round";
constexpr const char* kSinceRoundMs = "since_round_ms";
constexpr const char* kWorldSize = "world_size";
constexpr const char* kMinNodes = "min_nodes";
constexpr const char* kMaxNodes = "max_nodes";
constexpr const char* kRendezvousHost = "rendezvous_host";
constexpr const char* kMembers = "members";
constexpr const char* kSpares = "spares";
constexpr const char* kRestartsUsed = "restarts_used";
constexpr const char* kRestartsLeft = "restarts_left";
constexpr const char* kMaxRestarts = "max_restarts";
constexpr const char* kLastFailure = "last_failure";
constexpr const char* kLosses = "losses";
constexpr const char* kFailedOn = "failed_on";
constexpr const char* kAgent = "agent";
constexpr const char* kHost = "host";
constexpr const char* kNodeRank = "node_rank";
constexpr const char* kBaseRank = "base_rank";
constexpr const char* kLocalWorldSize = "local_world_size";
constexpr const char* kConnected = "connected";
constexpr const char* kHeardMs = "heard_ms";
constexpr const char* kWasMember = "was_member";
constexpr const char* kReason = "reason";
constexpr const char* kAgoMs = "ago_ms";
constexpr const char* kEndedJob = "ended_job";
constexpr const char* kRank = "rank";
constexpr const char* kLocalRank = "local_rank";
constexpr const char* kPid = "pid";
constexpr const char* kExitCode = "exit_code";
constexpr const char* kSignal = "signal";
constexpr const char* kJobs = "jobs";
constexpr const char* kTotal = "total";
constexpr const char* kError = "error";
constexpr const char* kQuarantined = "quarantined";
constexpr const char* kFailures = "failures";
constexpr const char* kLeftMs = "left_ms";
}  // namespace field

template <typename Enum, std::size_t N>
std::string_view nameOf(const std::array<std::pair<Enum, std::string_view>, N>& names, Enum value) {
  for (const auto& [each, name] : names) {
    if (each == value) {
      return name;
    }
  }
  return "unknown";
}

template <typename Enum, std::size_t N>
Enum valueOf(const std::array<std::pair<Enum, std::string_view>, N>& names, const json& text,
             const char* what) {
  const auto name = text.get<std::string>();
  for (const auto& [each, known] : names) {
    if (known == name) {
      return each;
    }
  }
  throw std::invalid_argument(std::string("unknown ") + what + " '" + name + "'");
}

int toInt(const json& value) {
  const auto number = value.get<std::int64_t>();
  if (number < INT_MIN || number > INT_MAX) {
    throw std::out_of_range("a number out of range");
  }
  return static_cast<int>(number);
}

// An optional field: JSON null, or absent, is nullopt.
template <typename T>
json orNull(const std::optional<T>& value) {
  return value ? json(*value) : json(nullptr);
}

std::optional<std::int64_t> optionalI64(const json& object, const char* key) {
  const auto it = object.find(key);
  if (it == object.end() || it->is_null()) {
    return std::nullopt;
  }
  return it->get<std::int64_t>();
}

std::optional<int> optionalInt(const json& object, const char* key) {
  const auto it = object.find(key);
  if (it == object.end() || it->is_null()) {
    return std::nullopt;
  }
  return toInt(*it);
}

json memberJson(const MemberStatus& member) {
  return {{field::kAgent, member.agent},
          {field::kHost, member.host},
          {field::kNodeRank, orNull(member.node_rank)},
          {field::kBaseRank, orNull(member.base_rank)},
          {field::kLocalWorldSize, member.local_world_size},
          {field::kState, memberStateName(member.state)},
          {field::kConnected, member.connected},
          {field::kHeardMs, orNull(member.heard_ms)},
          {field::kRestartsUsed, member.restarts_used},
          {field::kMaxRestarts, orNull(member.max_restarts)}};
}

MemberStatus memberFrom(const json& in) {
  MemberStatus member;
  member.agent = in.at(field::kAgent).get<std::string>();
  member.host = in.value(field::kHost, agentHost(member.agent));
  member.node_rank = optionalInt(in, field::kNodeRank);
  member.base_rank = optionalInt(in, field::kBaseRank);
  member.local_world_size = toInt(in.at(field::kLocalWorldSize));
  member.state = valueOf(kMemberStates, in.at(field::kState), "member state");
  member.connected = in.value(field::kConnected, true);
  member.heard_ms = optionalI64(in, field::kHeardMs);
  member.restarts_used = optionalInt(in, field::kRestartsUsed).value_or(0);
  member.max_restarts = optionalInt(in, field::kMaxRestarts);
  return member;
}

json failureJson(const FailureStatus& status) {
  const WorkerFailureReport& failure = status.failure;
  return {{field::kAgent, status.agent},
          {field::kHost, status.host},
          {field::kRound, failure.round},
          {field::kRank, failure.rank},
          {field::kLocalRank, failure.local_rank},
          {field::kPid, failure.pid},
          {field::kExitCode, orNull(failure.exit_code)},
          {field::kSignal, orNull(failure.signal)},
          {field::kReason, failure.reason},
          {field::kEndedJob, status.ended_job},
          {field::kAgoMs, status.ago_ms}};
}

FailureStatus failureFrom(const json& in) {
  FailureStatus status;
  status.agent = in.at(field::kAgent).get<std::string>();
  status.host = in.value(field::kHost, agentHost(status.agent));
  status.failure.round = in.at(field::kRound).get<std::int64_t>();
  status.failure.rank = toInt(in.at(field::kRank));
  status.failure.local_rank = toInt(in.at(field::kLocalRank));
  status.failure.pid = in.at(field::kPid).get<std::int64_t>();
  status.failure.exit_code = optionalInt(in, field::kExitCode);
  status.failure.signal = optionalInt(in, field::kSignal);
  status.failure.reason = in.value(field::kReason, std::string());
  status.ended_job = in.value(field::kEndedJob, false);
  status.ago_ms = in.at(field::kAgoMs).get<std::int64_t>();
  return status;
}

json lossJson(const LossStatus& loss) {
  return {{field::kAgent, loss.agent},
          {field::kHost, loss.host},
          {field::kRound, loss.round},
          {field::kWasMember, loss.was_member},
          {field::kReason, lossReasonName(loss.reason)},
          {field::kAgoMs, loss.ago_ms}};
}

LossStatus lossFrom(const json& in) {
  LossStatus loss;
  loss.agent = in.at(field::kAgent).get<std::string>();
  loss.host = in.value(field::kHost, agentHost(loss.agent));
  loss.round = in.at(field::kRound).get<std::int64_t>();
  loss.was_member = in.value(field::kWasMember, true);
  loss.reason = valueOf(kLossReasons, in.at(field::kReason), "loss reason");
  loss.ago_ms = in.at(field::kAgoMs).get<std::int64_t>();
  return loss;
}

json parseObject(std::string_view text, std::string_view what) {
  std::string why;
  json in = parseJson(text, &why);
  if (in.is_discarded() && why != kNotJson) {
    throw StoreError("the rendezvous answered " + std::string(what) + " with JSON " + why);
  }
  if (!in.is_object()) {
    throw StoreError("the rendezvous answered " + std::string(what) +
                     " with something that is not a JSON object: '" +
                     std::string(text.substr(0, 200)) + "'");
  }
  return in;
}

[[noreturn]] void malformed(std::string_view what, const std::exception& error) {
  throw StoreError("a malformed " + std::string(what) +
                   " answer from the rendezvous: " + error.what());
}

}  // namespace

std::string statusQuestion(std::string_view run_id) {
  return std::string(kStatusPrefix).append(run_id);
}

std::optional<std::string_view> statusRunOf(std::string_view question) {
  if (!question.starts_with(kStatusPrefix)) {
    return std::nullopt;
  }
  return question.substr(kStatusPrefix.size());
}

std::string agentHost(std::string_view agent) {
  const std::size_t colon = agent.rfind(':');
  if (colon == std::string_view::npos || colon == 0 || colon + 1 == agent.size() ||
      !std::all_of(agent.begin() + static_cast<std::ptrdiff_t>(colon) + 1, agent.end(),
                   [](char c) { return c >= '0' && c <= '9'; })) {
    return std::string(agent);
  }
  return std::string(agent.substr(0, colon));
}

std::string_view jobStateName(JobState state) { return nameOf(kJobStates, state); }
std::string_view memberStateName(MemberState state) { return nameOf(kMemberStates, state); }
std::string_view lossReasonName(LossReason reason) { return nameOf(kLossReasons, reason); }

std::string encodeJobStatus(const JobStatus& status) {
  json members = json::array();
  for (const MemberStatus& member : status.members) {
    members.push_back(memberJson(member));
  }
  json spares = json::array();
  for (const MemberStatus& spare : status.spares) {
    spares.push_back(memberJson(spare));
  }
  json losses = json::array();
  for (const LossStatus& loss : status.losses) {
    losses.push_back(lossJson(loss));
  }
  json quarantined = json::array();
  for (const HostQuarantine& host : status.quarantined) {
    quarantined.push_back({{field::kHost, host.host},
                           {field::kFailures, host.failures},
                           {field::kLeftMs, host.left_ms}});
  }
  return jsonText(json{{field::kRunId, status.run_id},
                       {field::kState, jobStateName(status.state)},
                       {field::kRound, status.round},
                       {field::kSinceRoundMs, orNull(status.since_round_ms)},
                       {field::kWorldSize, status.world_size},
                       {field::kMinNodes, status.min_nodes},
                       {field::kMaxNodes, status.max_nodes},
                       {field::kRendezvousHost, status.rendezvous_host},
                       {field::kMembers, std::move(members)},
                       {field::kSpares, std::move(spares)},
                       {field::kRestartsUsed, status.restarts_used},
                       {field::kRestartsLeft, orNull(status.restarts_left)},
                       {field::kLastFailure,
                        status.last_failure ? failureJson(*status.last_failure) : json(nullptr)},
                       {field::kLosses, std::move(losses)},
                       {field::kFailedOn, orNull(status.failed_on)},
                       {field::kQuarantined, std::move(quarantined)}});
}

JobStatus decodeJobStatus(std::string_view text) {
  const json in = parseObject(text, "a status question");
  JobStatus status;
  try {
    status.run_id = in.at(field::kRunId).get<std::string>();
    status.state = valueOf(kJobStates, in.at(field::kState), "job state");
    status.round = in.at(field::kRound).get<std::int64_t>();
    status.since_round_ms = optionalI64(in, field::kSinceRoundMs);
    status.world_size = toInt(in.at(field::kWorldSize));
    status.min_nodes = toInt(in.at(field::kMinNodes));
    status.max_nodes = toInt(in.at(field::kMaxNodes));
    status.rendezvous_host = in.value(field::kRendezvousHost, std::string());
    for (const json& member : in.at(field::kMembers)) {
      status.members.push_back(memberFrom(member));
    }
    for (const json& spare : in.at(field::kSpares)) {
      status.spares.push_back(memberFrom(spare));
    }
    status.restarts_used = optionalInt(in, field::kRestartsUsed).value_or(0);
    status.restarts_left = optionalInt(in, field::kRestartsLeft);
    if (const auto failure = in.find(field::kLastFailure);
        failure != in.end() && !failure->is_null()) {
      status.last_failure = failureFrom(*failure);
    }
    for (const json& loss : in.value(field::kLosses, json::array())) {
      status.losses.push_back(lossFrom(loss));
    }
    if (const auto failed_on = in.find(field::kFailedOn);
        failed_on != in.end() && !failed_on->is_null()) {
      status.failed_on = failed_on->get<std::string>();
    }
    for (const json& host : in.value(field::kQuarantined, json::array())) {
      status.quarantined.push_back({host.at(field::kHost).get<std::string>(),
                                    toInt(host.at(field::kFailures)),
                                    host.at(field::kLeftMs).get<std::int64_t>()});
    }
  } catch (const std::exception& error) {  // json's, toInt's and valueOf's
    malformed("status", error);
  }
  return status;
}

std::string encodeJobList(const JobList& jobs) {
  json list = json::array();
  for (const JobSummary& job : jobs.jobs) {
    list.push_back({{field::kRunId, job.run_id},
                    {field::kState, jobStateName(job.state)},
                    {field::kRound, job.round},
                    {field::kMembers, job.members},
                    {field::kSpares, job.spares},
                    {field::kWorldSize, job.world_size},
                    {field::kSinceRoundMs, orNull(job.since_round_ms)}});
  }
  json out = {{field::kJobs, std::move(list)}};
  if (jobs.total) {
    out[field::kTotal] = *jobs.total;
  }
  return jsonText(out);
}

JobList decodeJobList(std::string_view text) {
  const json in = parseObject(text, "the jobs question");
  JobList list;
  std::vector<JobSummary>& jobs = list.jobs;
  try {
    list.total = optionalI64(in, field::kTotal);
    for (const json& job : in.at(field::kJobs)) {
      JobSummary summary;
      summary.run_id = job.at(field::kRunId).get<std::string>();
      summary.state = valueOf(kJobStates, job.at(field::kState), "job state");
      summary.round = job.at(field::kRound).get<std::int64_t>();
      summary.members = toInt(job.at(field::kMembers));
      summary.spares = toInt(job.at(field::kSpares));
      summary.world_size = toInt(job.at(field::kWorldSize));
      summary.since_round_ms = optionalI64(job, field::kSinceRoundMs);
      jobs.push_back(std::move(summary));
    }
  } catch (const std::exception& error) {
    malformed("jobs", error);
  }
  return list;
}

std::string encodeQueryError(const QueryError& error) {
  return jsonText(json{{field::kError, error.error}});
}

std::optional<QueryError> decodeQueryError(std::string_view text) {
  const json in = parseJson(text);
  const auto error = in.is_object() ? in.find(field::kError) : in.end();
  if (!in.is_object() || error == in.end() || !error->is_string()) {
    return std::nullopt;
  }
  return QueryError{error->get<std::string>()};
}

}  // namespace ddprun::proto::rendezvous

// The read-only questions the rendezvous answers (GETs of
// "ddprun/query/<question>"): computed under the store lock from what the
// service holds, never stored, so asking changes nothing an agent sees.
// The answers' shapes are proto/include/ddprun/proto/rendezvous_status.hpp.
#include <algorithm>
#include <nlohmann/json.hpp>
#include <string_view>
#include <unordered_set>

#include "ddprun/proto/json_text.hpp"
#include "ddprun/rendezvous/rendezvous_service.hpp"

namespace ddprun::rdzv {
namespace {

namespace protocol = proto::rendezvous;
using protocol::JobState;
using protocol::MemberState;

std::string errorAnswer(std::string why) { return protocol::encodeQueryError({std::move(why)}); }

std::int64_t millisecondsSince(std::chrono::steady_clock::time_point then,
                               std::chrono::steady_clock::time_point now) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(now - then).count();
}

}  // namespace

std::string RendezvousService::answer(std::string_view key, Clock::time_point now) const {
  const std::string_view question = protocol::queryOf(key);
  if (question == protocol::kQueryClock) {
    return proto::jsonText(nlohmann::json{
        {"steady_ns",
         std::chrono::duration_cast<std::chrono::nanoseconds>(now.time_since_epoch()).count()}});
  }
  if (question == protocol::kQueryJobs) {
    return jobsAnswer(now);
  }
  if (const auto run_id = protocol::statusRunOf(question)) {
    return statusAnswer(*run_id, now);
  }
  return errorAnswer(std::string(protocol::kNoSuchQuestion) + "'" + std::string(question) + "'");
}

// At most kMaxJobsListed runs, open ones first (what an operator asks
// about), each group in run id order; `total` says how many are held.
std::string RendezvousService::jobsAnswer(Clock::time_point now) const {
  protocol::JobList list;
  list.total = static_cast<std::int64_t>(runs_.size());
  for (const bool closed : {false, true}) {
    for (const auto& [run_id, run] : runs_) {
      if (list.jobs.size() == kMaxJobsListed) {
        return protocol::encodeJobList(list);
      }
      if (run.rdzv.closed() != closed) {
        continue;
      }
      const protocol::JobStatus status = statusOf(run_id, run, now);
      list.jobs.push_back(
          {run_id, status.state, status.round, static_cast<int>(status.members.size()),
           static_cast<int>(status.spares.size()), status.world_size, status.since_round_ms});
    }
  }
  return protocol::encodeJobList(list);
}

std::string RendezvousService::statusAnswer(std::string_view run_id, Clock::time_point now) const {
  const auto run = runs_.find(run_id);
  if (run == runs_.end()) {
    return errorAnswer("no rendezvous '" + std::string(run_id) + "' here");
  }
  return protocol::encodeJobStatus(statusOf(run->first, run->second, now));
}

protocol::JobStatus RendezvousService::statusOf(const std::string& run_id, const Run& run,
                                                Clock::time_point now) const {
  const ElasticRendezvous& rdzv = run.rdzv;
  const JobRecord& record = run.record;
  protocol::JobStatus status;
  status.run_id = run_id;
  status.round = rdzv.restoring().value_or(rdzv.round());
  status.min_nodes = run.settings.min_nodes;
  status.max_nodes = run.settings.max_nodes;
  status.rendezvous_host = options_.host_agent;
  if (rdzv.closed()) {
    status.state = run.aborted_by.empty() ? JobState::kClosed : JobState::kFailed;
  } else if (rdzv.restoring()) {
    status.state = JobState::kRestoring;
  } else if (rdzv.complete()) {
    status.state = JobState::kRunning;
  } else {
    status.state = record.roundDecidedAt() ? JobState::kSuspended : JobState::kForming;
  }
  if (const auto decided = record.roundDecidedAt()) {
    status.since_round_ms = millisecondsSince(*decided, now);
  }
  describeMembers(run, now, status);
  status.restarts_used = record.restarts();
  if (const auto& failure = record.lastFailure()) {
    status.last_failure = protocol::FailureStatus{
        failure->agent, protocol::agentHost(failure->agent), failure->report, failure->ended_job,
        millisecondsSince(failure->when, now)};
  }
  for (const JobRecord::Loss& loss : record.losses()) {
    status.losses.push_back({loss.agent, protocol::agentHost(loss.agent), loss.round,
                             loss.was_member, loss.reason, millisecondsSince(loss.when, now)});
  }
  if (!run.aborted_by.empty()) {
    status.failed_on = run.aborted_by;
  }
  for (const Quarantine& host : rdzv.quarantined(now)) {
    status.quarantined.push_back(
        {host.host, host.failures,
         std::chrono::ceil<std::chrono::milliseconds>(host.until - now).count()});
  }
  return status;
}

// Members in group-rank order (their ranks once the round is complete) and
// spares; the restarts left are the fewest any member has.
void RendezvousService::describeMembers(const Run& run, Clock::time_point now,
                                        protocol::JobStatus& status) const {
  const ElasticRendezvous& rdzv = run.rdzv;
  // Members still waiting for node 0's store, looked up once each.
  std::unordered_set<std::string_view> starting;
  if (run.held_round == rdzv.round()) {
    for (const NodeAssignment& node : run.held) {
      starting.insert(node.id);
    }
  }
  int next_rank = 0;
  for (const std::string& agent : rdzv.restoring() ? rdzv.rejoined() : rdzv.members()) {
    protocol::MemberStatus member =
        memberStatus(run, agent, memberState(run, agent, starting.contains(agent)), now);
    if (rdzv.complete()) {
      member.node_rank = static_cast<int>(status.members.size());
      member.base_rank = next_rank;
      next_rank += member.local_world_size;
    }
    if (member.max_restarts) {
      const int left = std::max(0, *member.max_restarts - member.restarts_used);
      status.restarts_left = std::min(status.restarts_left.value_or(left), left);
    }
    status.members.push_back(std::move(member));
  }
  status.world_size = next_rank;
  for (const std::string& agent : rdzv.spares()) {
    status.spares.push_back(memberStatus(run, agent, MemberState::kSpare, now));
  }
}

// A member's state; `starting`: it waits for node 0's store.
MemberState RendezvousService::memberState(const Run& run, const std::string& agent,
                                           bool starting) {
  const ElasticRendezvous& rdzv = run.rdzv;
  if (rdzv.restoring()) {
    return MemberState::kRestoring;
  }
  if (run.exit_barrier.reported(agent, rdzv.round())) {
    return MemberState::kDone;
  }
  if (rdzv.closed()) {
    return MemberState::kEnded;
  }
  if (!rdzv.complete()) {
    return MemberState::kWaiting;
  }
  return starting ? MemberState::kStarting : MemberState::kRunning;
}

// A member's or a spare's entry, but for its ranks.
protocol::MemberStatus RendezvousService::memberStatus(const Run& run, const std::string& agent,
                                                       MemberState state, Clock::time_point now) {
  protocol::MemberStatus member;
  member.agent = agent;
  member.host = protocol::agentHost(agent);
  member.state = state;
  const auto held = run.agents.find(agent);
  member.connected = held != run.agents.end() && held->second.lease.has_value();
  if (const auto seen = run.rdzv.lastSeen(agent)) {
    member.heard_ms = millisecondsSince(*seen, now);
  }
  if (const JobRecord::Profile* profile = run.record.profile(agent)) {
    member.local_world_size = profile->local_world_size;
    member.max_restarts = profile->max_restarts;
    member.restarts_used = profile->restarts_used;
  }
  return member;
}

}  // namespace ddprun::rdzv

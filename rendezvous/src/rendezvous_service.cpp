#include "ddprun/rendezvous/rendezvous_service.hpp"

#include <algorithm>
#include <utility>
#include <vector>

namespace ddprun::rdzv {
namespace {

namespace protocol = proto::rendezvous;
using protocol::Event;
using protocol::EventType;

ElasticSettings settingsFrom(const protocol::JoinRequest& join) {
  ElasticSettings settings;
  settings.min_nodes = join.min_nodes;
  settings.max_nodes = join.max_nodes;
  settings.last_call_timeout = join.last_call_timeout;
  settings.keep_alive_timeout = join.keep_alive_timeout;
  settings.quarantine_after = join.quarantine_after.value_or(settings.quarantine_after);
  settings.quarantine_duration = join.quarantine_duration.value_or(settings.quarantine_duration);
  return settings;
}

bool sameShape(const ElasticSettings& a, const ElasticSettings& b) {
  return a.min_nodes == b.min_nodes && a.max_nodes == b.max_nodes;
}

Event errorEvent(std::string message) {
  Event event;
  event.type = EventType::kError;
  event.message = std::move(message);
  return event;
}

constexpr const char* kTokenRequired =
    "the rendezvous at this endpoint requires the job's token: give every agent "
    "--rdzv-conf token_file=PATH with the token the rendezvous was started with";

}  // namespace

Event RendezvousService::simpleEvent(EventType type, int64_t round) {
  Event event;
  event.type = type;
  event.round = round;
  return event;
}

bool RendezvousService::isRendezvousKey(std::string_view key) {
  return protocol::isElasticKey(key);
}

bool RendezvousService::isQueryKey(std::string_view key) { return protocol::isQueryKey(key); }

std::optional<RendezvousService::Refusal> RendezvousService::onSet(ClientId client,
                                                                   std::string_view key,
                                                                   std::string_view value,
                                                                   Clock::time_point now,
                                                                   KeySpace& keys) {
  const auto parts = protocol::parseElasticKey(key);
  if (!parts) {
    return Refusal{"a malformed rendezvous key '" + std::string(key) + "'"};
  }
  if (!parts->verb || (*parts->verb == protocol::Verb::kAck && !options_.event_acks)) {
    return Refusal{"an unknown rendezvous request '" + parts->verb_text + "'"};
  }
  if (*parts->verb == protocol::Verb::kJoin) {
    return join(client, parts->run_id, value, now, keys);
  }
  std::optional<std::string> refused;
  if (*parts->verb == protocol::Verb::kChallenge) {
    refused = challenge(client, parts->run_id, value);
  } else if (*parts->verb == protocol::Verb::kAck) {
    refused = ack(client, parts->run_id, value, keys);
  } else {
    refused = verb(client, *parts, value, now, keys);
  }
  forgetExpiredRuns(now, keys);  // a leave or a close may have passed a bound
  if (refused) {
    return Refusal{std::move(*refused)};
  }
  return std::nullopt;
}

// Every verb but join and challenge: the agent's own lease speaking for it.
std::optional<std::string> RendezvousService::verb(ClientId client,
                                                   const protocol::ElasticRequestKey& key,
                                                   std::string_view value, Clock::time_point now,
                                                   KeySpace& keys) {
  if (dropped_leases_.contains(client)) {
    return std::nullopt;  // its agent reads "dropped" in its events
  }
  std::string why;
  const auto report = protocol::decodeVerbValue(value, why);
  if (!report) {
    return why;
  }
  const std::string& run_id = key.run_id;
  const std::string& agent = report->agent;
  if (auto refusal = authorize(client, run_id, key.verb_text, agent)) {
    return refusal;
  }
  Run& run = runs_.find(run_id)->second;
  switch (*key.verb) {
    case protocol::Verb::kJoin:
    case protocol::Verb::kChallenge:
    case protocol::Verb::kAck:
      break;  // onSet's
    case protocol::Verb::kStoreReady:
      releaseRound(run_id, run, agent, keys);
      break;
    case protocol::Verb::kHeartbeat:
      run.rdzv.heartbeat(agent, now);
      break;
    case protocol::Verb::kRestart: {
      run.record.reported(*report, /*ended_job=*/false, now);
      // Its failure's round tells a first failure from one seen again.
      const auto failed_round =
          report->failure ? std::optional(report->failure->round) : std::nullopt;
      publish(run_id, run, run.rdzv.restart(agent, now, failed_round), now, keys);
      break;
    }
    case protocol::Verb::kLeave:
      bindings_.erase(client);
      endLease(run, agent);
      noteLeases(run_id, run, now);
      noteLoss(run, agent, protocol::LossReason::kLeft, now);
      publish(run_id, run, run.rdzv.lose(agent, now), now, keys);
      tell(run_id, run, agent, simpleEvent(EventType::kLeft), keys);  // its reader can stop
      break;
    case protocol::Verb::kClose:
      publish(run_id, run, run.rdzv.close(), now, keys);
      break;
    case protocol::Verb::kDone:
      finishMember(run_id, run, agent, keys);
      break;
    case protocol::Verb::kAbort:
      run.aborted_by = agent;  // the closed events say the job failed, and where
      run.record.reported(*report, /*ended_job=*/true, now);
      publish(run_id, run, run.rdzv.close(), now, keys);
      break;
  }
  return std::nullopt;
}

// Only agents steer a job: every request but a join must come from the
// connection that joined as that agent of that run (its lease).
std::optional<std::string> RendezvousService::authorize(ClientId client, const std::string& run_id,
                                                        std::string_view verb,
                                                        std::string_view agent) const {
  const auto binding = bindings_.find(client);
  if (binding == bindings_.end() || binding->second.run_id != run_id ||
      binding->second.agent != agent) {
    return "'" + std::string(verb) + "' for rendezvous '" + run_id + "' as '" + std::string(agent) +
           "' from a client that is not an agent of rendezvous '" + run_id +
           "' (only the connection that joined as that agent may speak for it)";
  }
  return std::nullopt;
}

// Two jobs chose one endpoint (under Slurm: derived ports that collide), and
// this agent's bind found the other job's hosting agent there: said at once,
// rather than merging the jobs or waiting for join_timeout.
std::string RendezvousService::foreignRun(const std::string& run_id) const {
  return "this endpoint is the rendezvous of another job (run '" + options_.served_run +
         "', hosted by agent '" + options_.host_agent + "'), not of run '" + run_id +
         "': two jobs chose one endpoint (under Slurm, a derived port that collides); give this "
         "job an --rdzv-endpoint of its own";
}

// The checks come before anything is written: a join refused here leaves
// every agent's keys and events as they were. An agent id held by another
// connection is refused first, whatever the join carries.
std::optional<RendezvousService::Refusal> RendezvousService::join(ClientId client,
                                                                  const std::string& run_id,
                                                                  std::string_view payload,
                                                                  Clock::time_point now,
                                                                  KeySpace& keys) {
  std::string why;
  const auto request = protocol::decodeJoin(payload, why);
  if (!request) {
    return Refusal{why};
  }
  if (const auto bound = bindings_.find(client); bound != bindings_.end()) {
    return Refusal{"a second join on a connection that joined rendezvous '" + bound->second.run_id +
                   "' as '" + bound->second.agent + "'"};
  }
  if (const auto held = runs_.find(run_id); held != runs_.end()) {
    const auto known = held->second.agents.find(request->agent);
    if (known != held->second.agents.end() && known->second.lease) {
      return Refusal{"a join of rendezvous '" + run_id + "' as '" + request->agent +
                     "', which holds a connection already"};
    }
  }
  if (!options_.served_run.empty() && run_id != options_.served_run) {
    refused_joins_[client] = {run_id, protocol::encodeEvent(errorEvent(foreignRun(run_id)))};
    return Refusal{"a join of rendezvous '" + run_id + "' at the rendezvous of run '" +
                       options_.served_run + "' only",
                   /*close=*/false};
  }
  if (!proven(client, run_id, *request)) {
    refused_joins_[client] = {run_id, protocol::encodeEvent(errorEvent(kTokenRequired))};
    return Refusal{"a join of rendezvous '" + run_id + "' as '" + request->agent +
                       "' without a valid proof of the token",
                   /*close=*/false};
  }
  refused_joins_.erase(client);
  const ElasticSettings settings = settingsFrom(*request);
  auto [it, created] = runs_.try_emplace(run_id, settings);
  Run& run = it->second;
  openStream(run_id, run, request->agent, request->session, keys);
  if (!sameShape(run.settings, settings)) {
    tell(run_id, run, request->agent,
         errorEvent("rendezvous '" + run_id +
                    "' runs with --nnodes=" + std::to_string(run.settings.min_nodes) + ":" +
                    std::to_string(run.settings.max_nodes) + ", this agent asked for " +
                    std::to_string(settings.min_nodes) + ":" + std::to_string(settings.max_nodes)),
         keys);
    return std::nullopt;
  }
  const AgentInfo agent{request->agent, request->local_world_size, request->node_rank,
                        request->last_round};
  Events events;
  const JoinStatus status =
      request->rejoin ? run.rdzv.rejoin(agent,
                                        {request->rejoin->round, request->rejoin->group_rank,
                                         request->rejoin->group_world_size},
                                        now, events)
                      : run.rdzv.join(agent, now, events);
  if (status == JoinStatus::kClosed) {
    tell(run_id, run, agent.id, simpleEvent(EventType::kClosed), keys);
    return std::nullopt;
  }
  bindings_[client] = {run_id, agent.id};
  AgentState& state = run.agents[agent.id];
  grantLease(run, state, client);
  noteLeases(run_id, run, now);
  state.store_host = request->store_host;
  state.store_port = request->store_port;
  run.record.joined(*request);
  if (request->rejoin && request->rejoin->workers_done) {
    recordDone(run, agent.id, request->rejoin->round);
  }
  if (status == JoinStatus::kSpare) {
    tell(run_id, run, agent.id, simpleEvent(EventType::kSpare), keys);
  } else if (status == JoinStatus::kQuarantined) {
    tellQuarantined(run_id, run, agent.id, run.rdzv.round(), now, keys);
  }
  publish(run_id, run, events, now, keys);
  if (run.rdzv.complete() && !run.record.roundDecidedAt()) {
    run.record.roundDecided(now);  // restored as it was, with no new round
  }
  pushExitBarrier(run_id, run, keys);
  return std::nullopt;
}

// A join starts the agent's events afresh under its session; what an earlier
// session left behind is dropped.
void RendezvousService::openStream(const std::string& run_id, Run& run, const std::string& agent,
                                   int64_t session, KeySpace& keys) {
  Stream& stream = run.agents[agent].stream;
  dropEvents(run_id, agent, stream, stream.next, keys);
  stream = {session, 0, 0};
}

void RendezvousService::recordDone(Run& run, const std::string& agent, int64_t round) {
  run.exit_barrier.record(agent, round, run.rdzv);
}

// The exit barrier, pushed: when every member of the running round has
// reported its workers done, each is told "finished". A newer round resets
// it. While a round is being restored, reports count for that round.
void RendezvousService::finishMember(const std::string& run_id, Run& run, const std::string& agent,
                                     KeySpace& keys) {
  if (const auto restoring = run.rdzv.restoring()) {
    recordDone(run, agent, *restoring);
    return;
  }
  if (!run.rdzv.complete() || !run.rdzv.isMember(agent)) {
    return;
  }
  recordDone(run, agent, run.rdzv.round());
  pushExitBarrier(run_id, run, keys);
}

void RendezvousService::pushExitBarrier(const std::string& run_id, Run& run, KeySpace& keys) {
  const auto finished = run.exit_barrier.due(run.rdzv);
  if (!finished) {
    return;
  }
  const Event event = simpleEvent(EventType::kFinished, *finished);
  for (const std::string& member : run.rdzv.members()) {
    tell(run_id, run, member, event, keys);
  }
}

bool RendezvousService::onDisconnect(ClientId client, Clock::time_point now, KeySpace& keys) {
  challenges_.erase(client);
  refused_joins_.erase(client);
  dropped_leases_.erase(client);
  const auto binding = bindings_.find(client);
  if (binding == bindings_.end()) {
    return false;
  }
  const Binding lost = binding->second;
  bindings_.erase(binding);
  if (auto run = runs_.find(lost.run_id); run != runs_.end()) {
    counters_.lost_disconnected += run->second.rdzv.closed() ? 0 : 1;
    endLease(run->second, lost.agent);
    noteLeases(lost.run_id, run->second, now);
    noteLoss(run->second, lost.agent, protocol::LossReason::kConnectionClosed, now);
    publish(lost.run_id, run->second, run->second.rdzv.lose(lost.agent, now), now, keys);
    pushExitBarrier(lost.run_id, run->second, keys);
  }
  forgetExpiredRuns(now, keys);  // beyond kMaxIdleRuns
  return true;
}

bool RendezvousService::loseHungUpAgents(std::string_view key,
                                         const std::function<bool(ClientId)>& hung_up,
                                         Clock::time_point now, KeySpace& keys) {
  std::optional<std::string> run_id;  // owned: a parsed key's parts end with their scope
  if (isQueryKey(key)) {
    if (const auto asked = protocol::statusRunOf(protocol::queryOf(key))) {
      run_id.emplace(*asked);
    }
  } else if (auto parts = protocol::parseElasticKey(key);
             parts && parts->verb == protocol::Verb::kRestart) {
    run_id = std::move(parts->run_id);
  }
  if (!run_id) {
    return false;
  }
  const auto run = runs_.find(*run_id);
  if (run == runs_.end()) {
    return false;
  }
  std::vector<ClientId> closed;
  for (const auto& [agent, state] : run->second.agents) {
    if (state.lease && hung_up(*state.lease)) {
      closed.push_back(*state.lease);
    }
  }
  for (const ClientId client : closed) {
    onDisconnect(client, now, keys);  // its session's own close finds nothing left to do
  }
  return !closed.empty();
}

// Expired agents are told too: a host whose link comes back must learn it
// was dropped, or its agent and workers would run on alone.
void RendezvousService::tick(Clock::time_point now, KeySpace& keys) {
  std::vector<Expired> expired;
  for (auto& [run_id, run] : runs_) {
    const int64_t round = run.rdzv.round();
    expired.clear();
    publish(run_id, run, run.rdzv.tick(now, expired), now, keys);
    for (const Expired& agent : expired) {
      run.record.lost(agent.id, round, agent.was_member, protocol::LossReason::kNoHeartbeat, now);
      ++counters_.lost_silent;
      tell(run_id, run, agent.id, simpleEvent(EventType::kDropped), keys);
      if (const auto lease = endLease(run, agent.id)) {
        bindings_.erase(*lease);  // it speaks for nobody any more
        dropped_leases_.insert(*lease);
      }
    }
    noteLeases(run_id, run, now);
    pushExitBarrier(run_id, run, keys);
  }
  forgetExpiredRuns(now, keys);
}

void RendezvousService::excuseStall(Clock::duration stalled, Clock::time_point now) {
  for (auto& [run_id, run] : runs_) {
    run.rdzv.excuseStall(stalled, now);
  }
}

std::optional<RendezvousService::Clock::time_point> RendezvousService::nextDeadline() const {
  std::optional<Clock::time_point> earliest;
  if (!idle_runs_.empty()) {
    earliest = idle_runs_.front().first + options_.idle_run_timeout;
  }
  if (!closed_runs_.empty()) {
    const auto forget_closed = closed_runs_.front().first + options_.run_retention;
    earliest = earliest ? std::min(*earliest, forget_closed) : forget_closed;
  }
  for (const auto& [run_id, run] : runs_) {
    const auto deadline = run.rdzv.nextDeadline();
    if (deadline && (!earliest || *deadline < *earliest)) {
      earliest = deadline;
    }
  }
  return earliest;
}

// A loss `ddprun status` will show: an agent the running job still counted
// on (after the job closed, agents leave as they should).
void RendezvousService::noteLoss(Run& run, const std::string& agent, protocol::LossReason reason,
                                 Clock::time_point now) {
  if (run.rdzv.closed() || !run.rdzv.knows(agent)) {
    return;
  }
  run.record.lost(agent, run.rdzv.round(), run.rdzv.isMember(agent), reason, now);
}

void RendezvousService::grantLease(Run& run, AgentState& agent, ClientId client) {
  if (!agent.lease) {
    ++run.leases;
  }
  agent.lease = client;
}

std::optional<ClientId> RendezvousService::endLease(Run& run, std::string_view agent) {
  const auto known = run.agents.find(agent);
  if (known == run.agents.end() || !known->second.lease) {
    return std::nullopt;
  }
  --run.leases;
  return std::exchange(known->second.lease, std::nullopt);
}

}  // namespace ddprun::rdzv

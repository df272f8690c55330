// What the service forgets, so that a daemon that runs for months holds only
// what its recent jobs left (docs/ddprund.md):
// - open runs none of whose agents holds a connection, after
//   options_.idle_run_timeout, or at once beyond kMaxIdleRuns, the one idle longest
//   first. A run whose agents merely went away would otherwise be held for
//   ever; to an agent that comes back, a forgotten run is what a restarted
//   daemon is (it rejoins, and the round is restored or formed afresh);
// - closed runs, after options_.run_retention (so `ddprun status` still answers for
//   them a while), or at once beyond kMaxClosedRuns, the one closed longest
//   ago first;
// - events an agent acknowledged (the ack verb): it has them, and never reads
//   them again.
// Forgetting a run drops its events, its status and its metric series.
#include "ddprun/rendezvous/rendezvous_service.hpp"

namespace ddprun::rdzv {

namespace protocol = proto::rendezvous;

void RendezvousService::noteLeases(const std::string& run_id, Run& run, Clock::time_point now) {
  const bool idle = run.leases == 0 && !run.rdzv.closed();
  if (idle && !run.idle) {
    run.idle = idle_runs_.insert(idle_runs_.end(), {now, run_id});
  } else if (!idle && run.idle) {
    idle_runs_.erase(*run.idle);
    run.idle.reset();
  }
}

// A closed run is never idle: its retention is the closed one's.
void RendezvousService::noteClosed(const std::string& run_id, Run& run, Clock::time_point now) {
  if (!run.rdzv.closed() || run.closed) {
    return;
  }
  if (run.idle) {
    idle_runs_.erase(*run.idle);
    run.idle.reset();
  }
  run.closed = closed_runs_.insert(closed_runs_.end(), {now, run_id});
}

void RendezvousService::forgetExpiredRuns(Clock::time_point now, KeySpace& keys) {
  while (!idle_runs_.empty() && (idle_runs_.size() > kMaxIdleRuns ||
                                 idle_runs_.front().first + options_.idle_run_timeout <= now)) {
    forgetRun(runs_.find(idle_runs_.front().second), keys);
  }
  while (!closed_runs_.empty() && (closed_runs_.size() > kMaxClosedRuns ||
                                   closed_runs_.front().first + options_.run_retention <= now)) {
    forgetRun(runs_.find(closed_runs_.front().second), keys);
  }
}

void RendezvousService::forgetRun(Runs::iterator run, KeySpace& keys) {
  for (auto& [agent, state] : run->second.agents) {
    dropEvents(run->first, agent, state.stream, state.stream.next, keys);
  }
  if (run->second.idle) {
    idle_runs_.erase(*run->second.idle);
  }
  if (run->second.closed) {
    closed_runs_.erase(*run->second.closed);
  }
  runs_.erase(run);
}

// Acks from a session the agent has left behind change nothing: that
// session's events went with its next join.
std::optional<std::string> RendezvousService::ack(ClientId client, const std::string& run_id,
                                                  std::string_view value, KeySpace& keys) {
  if (dropped_leases_.contains(client)) {
    return std::nullopt;  // its agent reads "dropped" in its events
  }
  std::string why;
  const auto ack = protocol::decodeEventAck(value, why);
  if (!ack) {
    return why;
  }
  if (auto refusal =
          authorize(client, run_id, protocol::verbName(protocol::Verb::kAck), ack->agent)) {
    return refusal;
  }
  Run& run = runs_.find(run_id)->second;
  Stream& stream = run.agents[ack->agent].stream;
  if (ack->session == stream.session) {
    dropEvents(run_id, ack->agent, stream, std::min(ack->read, stream.next), keys);
  }
  return std::nullopt;
}

void RendezvousService::dropEvents(const std::string& run_id, const std::string& agent,
                                   Stream& stream, int64_t end, KeySpace& keys) {
  for (; stream.acked < end; ++stream.acked) {
    keys.unpublish(protocol::eventKey(run_id, agent, stream.session, stream.acked));
  }
}

}  // namespace ddprun::rdzv

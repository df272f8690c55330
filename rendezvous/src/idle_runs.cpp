// Open runs none of whose agents holds a connection: the service forgets
// them after idle_run_timeout_, or at once beyond kMaxIdleRuns, the one idle
// longest first. A run whose agents merely went away would otherwise be held
// for ever, with its events, its status entry and its metric series; to an
// agent that comes back, a forgotten run is what a restarted daemon is (it
// rejoins, and the round is restored or formed afresh).
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

void RendezvousService::forgetIdleRuns(Clock::time_point now, KeySpace& keys) {
  while (!idle_runs_.empty() && (idle_runs_.size() > kMaxIdleRuns ||
                                 idle_runs_.front().first + idle_run_timeout_ <= now)) {
    forgetRun(runs_.find(idle_runs_.front().second), keys);
  }
}

void RendezvousService::forgetRun(Runs::iterator run, KeySpace& keys) {
  for (const auto& [agent, state] : run->second.agents) {
    for (int64_t n = 0; n < state.stream.next; ++n) {
      keys.unpublish(protocol::eventKey(run->first, agent, state.stream.session, n));
    }
  }
  if (run->second.idle) {
    idle_runs_.erase(*run->second.idle);
  }
  runs_.erase(run);
}

}  // namespace ddprun::rdzv

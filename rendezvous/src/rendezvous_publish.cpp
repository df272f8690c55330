// What the rendezvous tells its agents: RendezvousService's events
// (ElasticRendezvous' decisions) turned into each agent's event stream
// (docs/rendezvous-protocol.md §4). Called, like the rest of the service,
// under the store lock.
#include <variant>

#include "ddprun/rendezvous/rendezvous_service.hpp"

namespace ddprun::rdzv {
namespace {

namespace protocol = proto::rendezvous;
using protocol::Event;
using protocol::EventType;

}  // namespace

void RendezvousService::publish(const std::string& run_id, Run& run, const Events& events,
                                Clock::time_point now, KeySpace& keys) {
  for (const RendezvousEvent& event : events) {
    if (const auto* round = std::get_if<RoundCompleted>(&event)) {
      ++counters_.rounds_decided;
      counters_.formation_seconds.observe(std::chrono::duration<double>(round->formation).count());
      publishRound(run_id, run, *round, now, keys);
    } else if (const auto* suspended = std::get_if<RoundSuspended>(&event)) {
      for (const std::string& agent : suspended->waiting) {
        tell(run_id, run, agent, simpleEvent(EventType::kSuspended, suspended->round), keys);
      }
    } else if (const auto* quarantined = std::get_if<HostQuarantined>(&event)) {
      ++counters_.quarantines;
      for (const std::string& agent : quarantined->agents) {
        tellQuarantined(run_id, run, agent, quarantined->round, now, keys);
      }
    } else if (const auto* ended = std::get_if<QuarantineEnded>(&event)) {
      for (const std::string& agent : ended->spares) {
        tell(run_id, run, agent, simpleEvent(EventType::kSpare), keys);  // a plain one now
      }
    } else if (const auto* closed = std::get_if<RendezvousClosed>(&event)) {
      Event notice = simpleEvent(EventType::kClosed);
      if (!run.aborted_by.empty()) {
        notice.failed_on = run.aborted_by;
      }
      for (const std::string& agent : closed->agents) {
        tell(run_id, run, agent, notice, keys);
      }
    }
  }
  noteClosed(run_id, run, now);
}

// Every member learns its place and node 0's workers' store in one event.
// Node 0 is told at once; the others once node 0 has emptied its store for
// this round (store_ready), so no new worker sees the last round's keys. A
// newer round replaces what is still held.
void RendezvousService::publishRound(const std::string& run_id, Run& run,
                                     const RoundCompleted& round, Clock::time_point now,
                                     KeySpace& keys) {
  run.record.roundDecided(now);
  Event event = simpleEvent(EventType::kRound, round.round);
  event.reports = true;              // restart and abort may carry their failure
  event.acks = options_.event_acks;  // events read may be acknowledged, and dropped
  event.group_world_size = static_cast<int>(round.nodes.size());
  event.world_size = round.world_size;
  event.rendezvous_host = options_.host_agent;
  run.held.clear();
  run.held_round = round.round;
  run.held_for.clear();
  if (round.nodes.empty()) {
    return;
  }
  const NodeAssignment& node0 = round.nodes.front();
  const AgentState& host = run.agents[node0.id];
  event.store_host = host.store_host;
  event.store_port = host.store_port;
  run.held_for = node0.id;
  run.held.assign(round.nodes.begin() + 1, round.nodes.end());
  run.held_event = event;
  tellPlace(run_id, run, node0, event, keys);
}

void RendezvousService::releaseRound(const std::string& run_id, Run& run, const std::string& agent,
                                     KeySpace& keys) {
  if (agent != run.held_for || run.held_round != run.rdzv.round()) {
    return;  // not node 0 of the running round: news of a round already over
  }
  for (const NodeAssignment& node : run.held) {
    tellPlace(run_id, run, node, run.held_event, keys);
  }
  run.held.clear();
  run.held_for.clear();
}

void RendezvousService::tellPlace(const std::string& run_id, Run& run, const NodeAssignment& node,
                                  Event& event, KeySpace& keys) {
  event.group_rank = node.group_rank;
  event.base_rank = node.base_rank;
  event.local_world_size = node.local_world_size;
  tell(run_id, run, node.id, event, keys);
}

void RendezvousService::tell(const std::string& run_id, Run& run, const std::string& agent,
                             const Event& event, KeySpace& keys) {
  Stream& stream = run.agents[agent].stream;
  keys.publish(protocol::eventKey(run_id, agent, stream.session, stream.next),
               protocol::encodeEvent(event));
  ++stream.next;
}

void RendezvousService::tellQuarantined(const std::string& run_id, Run& run,
                                        const std::string& agent, int64_t round,
                                        Clock::time_point now, KeySpace& keys) {
  Event event = simpleEvent(EventType::kSpare);
  if (const auto quarantine = run.rdzv.quarantineOf(agent, now)) {
    event.round = round;
    event.quarantine = protocol::HostQuarantine{
        quarantine->host, quarantine->failures,
        std::chrono::ceil<std::chrono::milliseconds>(quarantine->until - now).count()};
  }
  tell(run_id, run, agent, event, keys);
}

}  // namespace ddprun::rdzv

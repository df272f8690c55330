// What the simulated agents send and how they react to what they read: the
// real agent's conversation (see agent_swarm.hpp), one agent at a time, on
// the loop's thread.
#include <algorithm>

#include "agent_swarm_parts.hpp"
#include "ddprun/launcher/rendezvous/clock_sync.hpp"

namespace ddprun::bench {
namespace {

using protocol::EventType;
using protocol::Verb;

}  // namespace

AgentSwarm::Clock::time_point AgentSwarm::join(std::size_t agent) {
  Agent& a = agents_[agent];
  if (!beating_) {
    beating_ = true;
    beats_from_ = Clock::now();
  }
  a.joined = true;
  a.lease.set(loop_->key(Verb::kJoin), a.join);
  flush(2 * agent);
  const Clock::time_point written = Clock::now();
  awaitEvent(agent);
  return written;
}

AgentSwarm::Clock::time_point AgentSwarm::send(std::size_t agent, Verb verb) {
  agents_[agent].lease.set(loop_->key(verb), records_[agent].id);
  flush(2 * agent);
  return Clock::now();
}

void AgentSwarm::sync(std::size_t agent) {
  agents_[agent].lease.ping(loop_->nonce, kSync);
  flush(2 * agent);
}

AgentSwarm::Clock::time_point AgentSwarm::kill(std::size_t agent) {
  Agent& a = agents_[agent];
  const Clock::time_point at = Clock::now();
  a.dead = true;
  a.lease.close();
  a.events.close();
  return at;
}

void AgentSwarm::awaitEvent(std::size_t agent) {
  Agent& a = agents_[agent];
  a.events.wait(protocol::eventKey(options_.run_id, records_[agent].id, 0, a.next_event),
                kWaitDone);
  flush(2 * agent + 1);
}

void AgentSwarm::onReply(std::size_t agent, bool lease, std::uint8_t tag, std::string_view value) {
  Agent& a = agents_[agent];
  switch (static_cast<Tag>(tag)) {
    case kHandshake:
      ++connected_;
      if (lease) {
        prepareJoin(agent);
      }
      break;
    case kSync:
      ++syncs_;
      break;
    case kBeat:
      break;
    case kClock:
      if (--a.clock_left > 0) {
        a.lease.get(loop_->clock_key, kClock);
        flush(2 * agent);
      } else {
        ++clock_done_;
      }
      break;
    case kWaitDone:
      a.events.get(protocol::eventKey(options_.run_id, records_[agent].id, 0, a.next_event),
                   kEvent);
      flush(2 * agent + 1);
      break;
    case kEvent:
      onEvent(agent, value);
      break;
  }
}

// The join the real agent sends (ElasticMembership::joinRequest): its store
// at the address its lease leaves from, no --node-rank, session 0.
void AgentSwarm::prepareJoin(std::size_t agent) {
  AgentRecord& record = records_[agent];
  record.store_host = localAddressOf(agents_[agent].lease.fd());
  protocol::JoinRequest request;
  request.agent = record.id;
  request.local_world_size = options_.local_world_size;
  request.min_nodes = options_.min_nodes;
  request.max_nodes = options_.max_nodes;
  request.last_call_timeout = options_.last_call_timeout;
  request.keep_alive_timeout = options_.keep_alive_interval * options_.keep_alive_max_attempt;
  request.store_host = record.store_host;
  request.store_port = record.store_port;
  request.max_restarts = 0;  // ddprun's default --max-restarts
  agents_[agent].join = protocol::encodeJoin(request);
}

void AgentSwarm::onEvent(std::size_t agent, std::string_view text) {
  Agent& a = agents_[agent];
  const std::string& id = records_[agent].id;
  protocol::Event event;
  try {
    event = protocol::decodeEvent(text);
  } catch (const std::exception& error) {
    throw SwarmFailure("agent " + id + " read a bad event: " + error.what());
  }
  ++a.next_event;
  if (event.type == EventType::kRound && event.acks && options_.ack_events) {
    a.acks = true;
  }
  if (a.acks && event.type != EventType::kClosed) {
    acknowledge(agent);  // a closed agent exits instead
  }
  switch (event.type) {
    case EventType::kRound:
      onRound(agent, event);
      break;
    case EventType::kFinished:
      ++finished_;
      last_finished_ = Clock::now();
      send(agent, Verb::kClose);  // the real agent closes the job once it is finished
      break;
    case EventType::kClosed:
      ++closed_;
      a.closed = true;  // the last event: the agent exits
      a.lease.close();
      a.events.close();
      return;
    default:
      throw SwarmFailure("agent " + id + " was told '" +
                         std::string(protocol::eventTypeName(event.type)) + "'" +
                         (event.message.empty() ? "" : " (" + event.message + ")") +
                         ", which no agent of this run should be told");
  }
  awaitEvent(agent);
}

// Every event read so far, in one ack (ElasticMembership::ackIfDue).
void AgentSwarm::acknowledge(std::size_t agent) {
  Agent& a = agents_[agent];
  a.lease.set(loop_->key(Verb::kAck),
              protocol::encodeEventAck({records_[agent].id, 0, a.next_event}));
  flush(2 * agent);
}

// Node 0 empties its workers' store and says so (store_ready) before its
// first clock query; every agent measures its clock once its join is taken.
void AgentSwarm::onRound(std::size_t agent, const protocol::Event& event) {
  Agent& a = agents_[agent];
  auto& rounds = records_[agent].rounds;
  rounds.push_back(event);
  if (holding_.size() < rounds.size()) {
    holding_.resize(rounds.size(), 0);
    last_held_.resize(rounds.size());
  }
  ++holding_[rounds.size() - 1];
  last_held_[rounds.size() - 1] = Clock::now();
  if (event.group_rank == 0) {
    send(agent, Verb::kStoreReady);
  }
  if (a.clock_left < 0) {
    a.clock_left = launcher::kClockSamples;
    a.lease.get(loop_->clock_key, kClock);
    flush(2 * agent);
  }
}

// Heartbeat slot k belongs to agent k mod N and falls at
// beats_from_ + k x interval / N: every agent beats once per interval, the
// agents evenly spread over it.
void AgentSwarm::beatDueAgents(Clock::time_point now) {
  if (!beating_) {
    return;
  }
  const auto slot = beatSlot();
  const auto due = static_cast<std::uint64_t>((now - beats_from_) / slot);
  for (; beats_sent_ < due; ++beats_sent_) {
    const std::size_t agent = beats_sent_ % agents_.size();
    Agent& a = agents_[agent];
    if (!a.joined || a.dead || a.closed) {
      continue;
    }
    a.lease.set(loop_->key(Verb::kHeartbeat), records_[agent].id);
    a.lease.ping(loop_->nonce, kBeat);
    flush(2 * agent);
    ++heartbeats_;
  }
}

std::chrono::nanoseconds AgentSwarm::beatSlot() const {
  const auto interval = std::chrono::nanoseconds(options_.keep_alive_interval);
  return std::max(std::chrono::nanoseconds(1),
                  interval / static_cast<std::int64_t>(std::max<std::size_t>(1, agents_.size())));
}

AgentSwarm::Clock::time_point AgentSwarm::nextBeat() const {
  if (!beating_) {
    return Clock::time_point::max();
  }
  return beats_from_ + beatSlot() * static_cast<std::int64_t>(beats_sent_ + 1);
}

}  // namespace ddprun::bench

#include "ddprun/rendezvous/elastic_rendezvous.hpp"

#include <algorithm>
#include <climits>

#include "ddprun/proto/rendezvous_status.hpp"

namespace ddprun::rdzv {

ElasticRendezvous::ElasticRendezvous(ElasticSettings settings) : settings_(settings) {}

JoinStatus ElasticRendezvous::join(const AgentInfo& agent, Clock::time_point now, Events& events) {
  if (closed_) {
    return JoinStatus::kClosed;
  }
  if (const auto known = index_.find(agent.id); known != index_.end()) {
    hear(known->second, now);
    return JoinStatus::kAlreadyKnown;
  }
  next_round_floor_ = std::max(next_round_floor_, agent.last_round + 1);
  if (restore_) {
    // Placed once the round is restored.
    restore_->arrivals.push_back(addHeard(restore_->heard, {agent, now}));
    return JoinStatus::kMember;
  }
  return place(admit({agent, now}), now, events);
}

// A known agent that is neither member nor spare yet: a member below
// max_nodes, else a spare.
JoinStatus ElasticRendezvous::place(AgentRef agent, Clock::time_point now, Events& events) {
  if (complete_ && inQuarantine(*agent, now)) {
    spares_.push_back(agent);  // the job holds min_nodes without it: it waits
    return JoinStatus::kQuarantined;
  }
  if (!complete_ && inQuarantine(*agent, now)) {
    endQuarantine(agent->host);  // a suspended job needs every node it can get
  }
  if (static_cast<int>(members_.size()) >= settings_.max_nodes) {
    spares_.push_back(agent);  // waits; triggers nothing
    return JoinStatus::kSpare;
  }
  addMember(agent, now, events);
  return JoinStatus::kMember;
}

void ElasticRendezvous::addMember(AgentRef agent, Clock::time_point now, Events& events) {
  if (!complete_ && !forming_since_) {
    forming_since_ = now;
  }
  agent->member = true;
  members_.push_back(agent);
  const int count = static_cast<int>(members_.size());
  if (complete_) {
    reform(now, events);  // a newcomer below max: everyone moves to a new round now
    return;
  }
  if (count >= settings_.max_nodes || (ever_completed_ && count >= settings_.min_nodes)) {
    // Full, or a suspended job got back to min_nodes: nobody else is awaited.
    completeRound(now, events);
    return;
  }
  if (count >= settings_.min_nodes && !last_call_deadline_) {
    last_call_deadline_ = now + settings_.last_call_timeout;
  }
}

void ElasticRendezvous::heartbeat(std::string_view id, Clock::time_point now) {
  if (const auto known = index_.find(id); known != index_.end()) {
    hear(known->second, now);
  }
}

Events ElasticRendezvous::lose(std::string_view id, Clock::time_point now) {
  Events events;
  loseTogether({&id, 1}, now, events);
  return events;
}

// Every one of `ids` goes before the round is re-formed, so that it is
// re-formed once, and never with a spare that is going too.
void ElasticRendezvous::loseTogether(std::span<const std::string_view> ids, Clock::time_point now,
                                     Events& events) {
  bool lost_member = false;
  for (const std::string_view id : ids) {
    if (restore_) {
      forgetRestoring(id);
    }
    const auto known = index_.find(id);
    if (closed_ || known == index_.end()) {
      continue;
    }
    lost_member = lost_member || known->second->member;
    remove(known->second);
  }
  if (!lost_member) {
    return;
  }
  if (complete_) {
    reform(now, events);
  } else if (static_cast<int>(members_.size()) < settings_.min_nodes) {
    last_call_deadline_.reset();
    if (members_.empty()) {
      forming_since_.reset();  // nobody is left waiting: the next arrival starts afresh
    }
  }
}

// The first restart of the running round re-forms it; every later one names
// the round it failed in, an older one, and is the same failure seen again.
Events ElasticRendezvous::restart(std::string_view id, Clock::time_point now,
                                  std::optional<int64_t> failed_round) {
  Events events;
  const auto known = index_.find(id);
  if (closed_ || !complete_ || known == index_.end() || !known->second->member ||
      (failed_round && *failed_round != round_)) {
    return events;
  }
  blame(known->second, now, events);
  reform(now, events);
  return events;
}

Events ElasticRendezvous::close() {
  Events events;
  if (closed_) {
    return events;
  }
  closed_ = true;
  RendezvousClosed notice{members()};
  for (const AgentRef spare : spares_) {
    notice.agents.push_back(spare->info.id);
  }
  events.emplace_back(std::move(notice));
  return events;
}

Events ElasticRendezvous::tick(Clock::time_point now) {
  std::vector<Expired> ignored;
  return tick(now, ignored);
}

// The silent are at the front of heard_: the walk stops at the first agent
// still within its keep-alive bound. A cut-off rendezvous holds them instead
// (elastic_cut_off.cpp), and loses those still held when the hold is over.
Events ElasticRendezvous::tick(Clock::time_point now, std::vector<Expired>& expired) {
  Events events;
  if (closed_) {
    return events;
  }
  const std::size_t first = expired.size();
  if (cut_off_ && now >= cut_off_->until) {
    for (const Agent& agent : cut_off_->held) {
      expired.push_back({agent.info.id, agent.member});
    }
  }
  const std::size_t held_lost = expired.size();
  for (const Agent& agent : heard_) {
    if (now - agent.last_seen < settings_.keep_alive_timeout) {
      break;
    }
    expired.push_back({agent.info.id, agent.member});
  }
  if (expired.size() > held_lost && cutOff(now)) {
    expired.resize(held_lost);  // its own silence: nobody is lost for it
    holdAll();
  }
  std::vector<std::string_view> silent;
  silent.reserve(expired.size() - first);
  for (std::size_t i = first; i < expired.size(); ++i) {
    silent.push_back(expired[i].id);
  }
  loseTogether(silent, now, events);
  if (!complete_ && last_call_deadline_ && now >= *last_call_deadline_ &&
      static_cast<int>(members_.size()) >= settings_.min_nodes) {
    completeRound(now, events);
  }
  if (restore_ && now >= restore_->deadline) {
    finishRestore(now, events);
  }
  endQuarantinesDue(now, events);
  return events;
}

// Moving every time by the same amount, capped at `now`, keeps their order.
// The waits the rendezvous keeps for the agents (a last call, a restore's)
// move by it too, never past a whole wait from now.
void ElasticRendezvous::excuseStall(Clock::duration stalled, Clock::time_point now) {
  const auto excuse = [&](Heard& heard) {
    for (Agent& agent : heard) {
      agent.last_seen = std::min(agent.last_seen + stalled, now);
    }
  };
  excuse(heard_);
  if (cut_off_) {
    excuse(cut_off_->held);
    cut_off_->since = std::min(cut_off_->since + stalled, now);
    cut_off_->until += stalled;
  }
  if (last_call_deadline_) {
    last_call_deadline_ =
        std::min(*last_call_deadline_ + stalled, now + settings_.last_call_timeout);
  }
  if (restore_) {
    excuse(restore_->heard);
    restore_->deadline = std::min(restore_->deadline + stalled, now + settings_.keep_alive_timeout);
  }
}

std::optional<ElasticRendezvous::Clock::time_point> ElasticRendezvous::nextDeadline() const {
  if (closed_) {
    return std::nullopt;
  }
  std::optional<Clock::time_point> earliest = last_call_deadline_;
  if (restore_ && (!earliest || restore_->deadline < *earliest)) {
    earliest = restore_->deadline;
  }
  if (!heard_.empty()) {
    const auto expiry = heard_.front().last_seen + settings_.keep_alive_timeout;
    if (!earliest || expiry < *earliest) {
      earliest = expiry;
    }
  }
  if (cut_off_ && (!earliest || cut_off_->until < *earliest)) {
    earliest = cut_off_->until;
  }
  if (const auto quarantine_end = nextQuarantineEnd();
      quarantine_end && (!earliest || *quarantine_end < *earliest)) {
    earliest = quarantine_end;
  }
  return earliest;
}

std::vector<std::string> ElasticRendezvous::members() const {
  std::vector<std::string> ids;
  ids.reserve(members_.size());
  for (const AgentRef member : members_) {
    ids.push_back(member->info.id);
  }
  return ids;
}

std::vector<std::string> ElasticRendezvous::spares() const {
  std::vector<std::string> ids;
  ids.reserve(spares_.size());
  for (const AgentRef spare : spares_) {
    ids.push_back(spare->info.id);
  }
  return ids;
}

void ElasticRendezvous::completeRound(Clock::time_point now, Events& events) {
  if (!ever_completed_) {
    orderFirstRound();
  }
  complete_ = true;
  ever_completed_ = true;
  last_call_deadline_.reset();
  round_ = std::max(round_, next_round_floor_);
  RoundCompleted done{round_, 0, {}, forming_since_ ? now - *forming_since_ : Clock::duration{}};
  forming_since_.reset();
  done.nodes.reserve(members_.size());
  for (const AgentRef member : members_) {
    const int group_rank = static_cast<int>(done.nodes.size());
    done.nodes.push_back(
        {member->info.id, group_rank, done.world_size, member->info.local_world_size});
    done.world_size += member->info.local_world_size;
  }
  events.emplace_back(std::move(done));
}

// Survivors keep their order; spares take the free places first, in arrival
// order (quarantined ones only where min_nodes needs them). The new round
// completes at once when it has min_nodes: every live agent is already here,
// so there is nobody to wait a last call for.
void ElasticRendezvous::reform(Clock::time_point now, Events& events) {
  ++round_;
  complete_ = false;
  last_call_deadline_.reset();
  forming_since_ = now;
  promoteSpares(now, events);
  if (static_cast<int>(members_.size()) >= settings_.min_nodes) {
    completeRound(now, events);
    return;
  }
  events.emplace_back(RoundSuspended{round_, members()});
}

// A member's loss re-forms the round (O(members) anyway); a spare's is rare.
void ElasticRendezvous::remove(AgentRef agent) {
  if (agent->member) {
    members_.erase(std::find(members_.begin(), members_.end(), agent));
  } else {
    spares_.erase(std::find(spares_.begin(), spares_.end(), agent));
  }
  index_.erase(agent->info.id);
  if (!agent->held) {
    heard_.erase(agent);
    return;
  }
  cut_off_->held.erase(agent);
  if (cut_off_->held.empty()) {
    cut_off_.reset();
  }
}

// --node-rank hints order the first round; agents without one follow in
// arrival order. Later rounds keep this order.
void ElasticRendezvous::orderFirstRound() {
  std::stable_sort(members_.begin(), members_.end(), [](AgentRef a, AgentRef b) {
    return a->info.rank_hint.value_or(INT_MAX) < b->info.rank_hint.value_or(INT_MAX);
  });
}

ElasticRendezvous::AgentRef ElasticRendezvous::addHeard(Heard& heard, Agent agent) {
  agent.host = proto::rendezvous::agentHost(agent.info.id);
  const AgentRef added = heard.insert(heard.end(), std::move(agent));
  keepHeardOrder(heard, added);
  return added;
}

// `agent` is at the back; it steps forward past any heard from later.
void ElasticRendezvous::keepHeardOrder(Heard& heard, AgentRef agent) {
  while (agent != heard.begin() && std::prev(agent)->last_seen > agent->last_seen) {
    heard.splice(std::prev(agent), heard, agent);
  }
}

ElasticRendezvous::AgentRef ElasticRendezvous::admit(Agent agent) {
  heardAgain(agent.last_seen);
  const AgentRef added = addHeard(heard_, std::move(agent));
  index_.emplace(added->info.id, added);
  return added;
}

// Anyone heard ends a cut-off's silence; a held agent heard is judged as
// before.
void ElasticRendezvous::hear(AgentRef agent, Clock::time_point now) {
  heardAgain(now);
  agent->last_seen = now;
  if (agent->held) {
    unhold(agent);
  } else {
    heard_.splice(heard_.end(), heard_, agent);
  }
  keepHeardOrder(heard_, agent);
}

bool ElasticRendezvous::isMember(std::string_view id) const {
  const auto known = index_.find(id);
  return known != index_.end() && known->second->member;
}

std::optional<ElasticRendezvous::Clock::time_point> ElasticRendezvous::lastSeen(
    std::string_view id) const {
  const auto known = index_.find(id);
  return known != index_.end() ? std::optional<Clock::time_point>(known->second->last_seen)
                               : std::nullopt;
}

}  // namespace ddprun::rdzv

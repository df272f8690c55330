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
  const AgentRef added = admit({agent, now});
  if (complete_ && inQuarantine(*added, now)) {
    spares_.push_back(added);  // the job holds min_nodes without it: it waits
    return JoinStatus::kQuarantined;
  }
  if (!complete_ && inQuarantine(*added, now)) {
    endQuarantine(added->host);  // a suspended job needs every node it can get
  }
  if (static_cast<int>(members_.size()) >= settings_.max_nodes) {
    spares_.push_back(added);  // waits; triggers nothing
    return JoinStatus::kSpare;
  }
  addMember(added, now, events);
  return JoinStatus::kMember;
}

JoinStatus ElasticRendezvous::rejoin(const AgentInfo& agent, const RoundMembership& membership,
                                     Clock::time_point now, Events& events) {
  const bool restorable = !closed_ && !ever_completed_ && !knows(agent.id) &&
                          (restore_ ? restore_->round == membership.round &&
                                          restore_->group_world_size == membership.group_world_size
                                    : members_.empty() && spares_.empty());
  if (!restorable) {
    return join(agent, now, events);  // the rendezvous kept its state: a plain join
  }
  if (!restore_) {
    // The others get one keep-alive timeout to come back. Assigned, not
    // emplace()d: clang 14 finds Restore not default-constructible there
    // (std::optional's check was made while the class was incomplete).
    restore_ = Restore{};
    restore_->round = membership.round;
    restore_->group_world_size = membership.group_world_size;
    restore_->deadline = now + settings_.keep_alive_timeout;
  }
  restore_->back.emplace_back(membership.group_rank, addHeard(restore_->heard, {agent, now}));
  if (static_cast<int>(restore_->back.size()) == restore_->group_world_size) {
    finishRestore(now, events);
  }
  return JoinStatus::kMember;
}

Events ElasticRendezvous::endRestore(Clock::time_point now) {
  Events events;
  if (restore_) {
    finishRestore(now, events);
  }
  return events;
}

// The restored round continues as it was, in group-rank order. A member that
// never came back, or a newcomer meanwhile, moves everyone on to a new round.
void ElasticRendezvous::finishRestore(Clock::time_point now, Events& events) {
  Restore restore = std::move(*restore_);
  restore_.reset();
  next_round_floor_ = std::max(next_round_floor_, restore.round + 1);
  // Its agents become known, in last-heard order among the rest.
  heard_.merge(restore.heard,
               [](const Agent& a, const Agent& b) { return a.last_seen < b.last_seen; });
  // An id that came twice (a caller that does not check) counts once, as it
  // first came: the index holds one agent per id.
  const auto duplicate = [&](AgentRef agent) {
    if (index_.emplace(agent->info.id, agent).second) {
      return false;
    }
    heard_.erase(agent);
    return true;
  };
  std::erase_if(restore.back, [&](const auto& entry) { return duplicate(entry.second); });
  std::erase_if(restore.arrivals, duplicate);
  if (restore.back.empty()) {
    // Nobody of that round is left: whoever arrived meanwhile starts afresh.
    for (AgentRef arrival : restore.arrivals) {
      addMember(arrival, now, events);
    }
    return;
  }
  std::stable_sort(restore.back.begin(), restore.back.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  for (auto& [group_rank, agent] : restore.back) {
    agent->member = true;
    members_.push_back(agent);
  }
  round_ = restore.round;
  complete_ = true;
  ever_completed_ = true;
  const bool changed = static_cast<int>(members_.size()) != restore.group_world_size;
  for (AgentRef arrival : restore.arrivals) {
    if (static_cast<int>(members_.size()) < settings_.max_nodes && !inQuarantine(*arrival, now)) {
      arrival->member = true;
      members_.push_back(arrival);
    } else {
      spares_.push_back(arrival);
    }
  }
  if (changed || static_cast<int>(members_.size()) != restore.group_world_size) {
    reform(now, events);
  }
}

void ElasticRendezvous::forgetRestoring(std::string_view id) {
  const auto matches = [&](AgentRef agent) { return agent->info.id == id; };
  const auto back = std::find_if(restore_->back.begin(), restore_->back.end(),
                                 [&](const auto& entry) { return matches(entry.second); });
  if (back != restore_->back.end()) {
    const AgentRef agent = back->second;
    restore_->back.erase(back);
    restore_->heard.erase(agent);
  }
  const auto arrival = std::find_if(restore_->arrivals.begin(), restore_->arrivals.end(), matches);
  if (arrival != restore_->arrivals.end()) {
    const AgentRef agent = *arrival;
    restore_->arrivals.erase(arrival);
    restore_->heard.erase(agent);
  }
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
  if (restore_) {
    forgetRestoring(id);
  }
  const auto known = index_.find(id);
  if (closed_ || known == index_.end()) {
    return events;
  }
  const bool was_member = known->second->member;
  remove(known->second);
  if (!was_member) {
    return events;
  }
  if (complete_) {
    reform(now, events);
  } else if (static_cast<int>(members_.size()) < settings_.min_nodes) {
    last_call_deadline_.reset();
    if (members_.empty()) {
      forming_since_.reset();  // nobody is left waiting: the next arrival starts afresh
    }
  }
  return events;
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
// still within its keep-alive bound.
Events ElasticRendezvous::tick(Clock::time_point now, std::vector<Expired>& expired) {
  Events events;
  if (closed_) {
    return events;
  }
  const std::size_t first = expired.size();
  for (const Agent& agent : heard_) {
    if (now - agent.last_seen < settings_.keep_alive_timeout) {
      break;
    }
    expired.push_back({agent.info.id, agent.member});
  }
  for (std::size_t i = first; i < expired.size(); ++i) {
    Events lost = lose(expired[i].id, now);
    events.insert(events.end(), lost.begin(), lost.end());
  }
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
void ElasticRendezvous::excuseStall(Clock::duration stalled, Clock::time_point now) {
  for (Agent& agent : heard_) {
    agent.last_seen = std::min(agent.last_seen + stalled, now);
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
  heard_.erase(agent);
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
  const AgentRef added = addHeard(heard_, std::move(agent));
  index_.emplace(added->info.id, added);
  return added;
}

void ElasticRendezvous::hear(AgentRef agent, Clock::time_point now) {
  agent->last_seen = now;
  heard_.splice(heard_.end(), heard_, agent);
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

std::vector<std::string> ElasticRendezvous::rejoined() const {
  std::vector<std::pair<int, std::string>> back;
  if (restore_) {
    for (const auto& [group_rank, agent] : restore_->back) {
      back.emplace_back(group_rank, agent->info.id);
    }
  }
  std::sort(back.begin(), back.end());
  std::vector<std::string> ids;
  ids.reserve(back.size());
  for (auto& entry : back) {
    ids.push_back(std::move(entry.second));
  }
  return ids;
}

}  // namespace ddprun::rdzv

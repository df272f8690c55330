#include "ddprun/rendezvous/elastic_rendezvous.hpp"

#include <algorithm>
#include <climits>

namespace ddprun::rdzv {

ElasticRendezvous::ElasticRendezvous(ElasticSettings settings) : settings_(settings) {}

JoinStatus ElasticRendezvous::join(const AgentInfo& agent, Clock::time_point now, Events& events) {
  if (closed_) {
    return JoinStatus::kClosed;
  }
  if (knows(agent.id)) {
    heartbeat(agent.id, now);
    return JoinStatus::kAlreadyKnown;
  }
  next_round_floor_ = std::max(next_round_floor_, agent.last_round + 1);
  if (restore_) {
    restore_->arrivals.push_back({agent, now});  // placed once the round is restored
    return JoinStatus::kMember;
  }
  if (static_cast<int>(members_.size()) >= settings_.max_nodes) {
    spares_.push_back({agent, now});  // waits; triggers nothing
    return JoinStatus::kSpare;
  }
  addMember({agent, now}, now, events);
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
    // The others get one keep-alive timeout to come back.
    restore_ = Restore{
        membership.round, membership.group_world_size, {}, {}, now + settings_.keep_alive_timeout};
  }
  restore_->back.emplace_back(membership.group_rank, Agent{agent, now});
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
  if (restore.back.empty()) {
    // Nobody of that round is left: whoever arrived meanwhile starts afresh.
    for (Agent& arrival : restore.arrivals) {
      addMember(std::move(arrival), now, events);
    }
    return;
  }
  std::stable_sort(restore.back.begin(), restore.back.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  for (auto& [group_rank, agent] : restore.back) {
    members_.push_back(std::move(agent));
  }
  round_ = restore.round;
  complete_ = true;
  ever_completed_ = true;
  const bool changed = static_cast<int>(members_.size()) != restore.group_world_size;
  for (Agent& arrival : restore.arrivals) {
    if (static_cast<int>(members_.size()) < settings_.max_nodes) {
      members_.push_back(std::move(arrival));
    } else {
      spares_.push_back(std::move(arrival));
    }
  }
  if (changed || static_cast<int>(members_.size()) != restore.group_world_size) {
    reform(now, events);
  }
}

void ElasticRendezvous::addMember(Agent agent, Clock::time_point now, Events& events) {
  if (!complete_ && !forming_since_) {
    forming_since_ = now;
  }
  members_.push_back(std::move(agent));
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

void ElasticRendezvous::heartbeat(const std::string& id, Clock::time_point now) {
  if (Agent* agent = find(id)) {
    agent->last_seen = now;
  }
}

Events ElasticRendezvous::lose(const std::string& id, Clock::time_point now) {
  Events events;
  if (restore_) {
    std::erase_if(restore_->back, [&](const auto& entry) { return entry.second.info.id == id; });
    std::erase_if(restore_->arrivals, [&](const Agent& agent) { return agent.info.id == id; });
  }
  if (closed_ || !knows(id)) {
    return events;
  }
  bool was_member = false;
  removeEverywhere(id, was_member);
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

Events ElasticRendezvous::restart(const std::string& id, Clock::time_point now) {
  Events events;
  const bool is_member = std::any_of(members_.begin(), members_.end(),
                                     [&](const Agent& agent) { return agent.info.id == id; });
  if (!closed_ && complete_ && is_member) {
    reform(now, events);
  }
  return events;
}

Events ElasticRendezvous::close() {
  Events events;
  if (closed_) {
    return events;
  }
  closed_ = true;
  RendezvousClosed notice;
  for (const auto* list : {&members_, &spares_}) {
    for (const Agent& agent : *list) {
      notice.agents.push_back(agent.info.id);
    }
  }
  events.emplace_back(std::move(notice));
  return events;
}

Events ElasticRendezvous::tick(Clock::time_point now) {
  Events events;
  if (closed_) {
    return events;
  }
  std::vector<std::string> silent;
  for (const auto* list : {&members_, &spares_}) {
    for (const Agent& agent : *list) {
      if (now - agent.last_seen >= settings_.keep_alive_timeout) {
        silent.push_back(agent.info.id);
      }
    }
  }
  for (const std::string& id : silent) {
    Events lost = lose(id, now);
    events.insert(events.end(), lost.begin(), lost.end());
  }
  if (!complete_ && last_call_deadline_ && now >= *last_call_deadline_ &&
      static_cast<int>(members_.size()) >= settings_.min_nodes) {
    completeRound(now, events);
  }
  if (restore_ && now >= restore_->deadline) {
    finishRestore(now, events);
  }
  return events;
}

void ElasticRendezvous::excuseStall(Clock::duration stalled, Clock::time_point now) {
  for (auto* list : {&members_, &spares_}) {
    for (Agent& agent : *list) {
      agent.last_seen = std::min(agent.last_seen + stalled, now);
    }
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
  for (const auto* list : {&members_, &spares_}) {
    for (const Agent& agent : *list) {
      const auto expiry = agent.last_seen + settings_.keep_alive_timeout;
      if (!earliest || expiry < *earliest) {
        earliest = expiry;
      }
    }
  }
  return earliest;
}

std::vector<std::string> ElasticRendezvous::members() const {
  std::vector<std::string> ids;
  for (const Agent& agent : members_) {
    ids.push_back(agent.info.id);
  }
  return ids;
}

std::vector<std::string> ElasticRendezvous::spares() const {
  std::vector<std::string> ids;
  for (const Agent& agent : spares_) {
    ids.push_back(agent.info.id);
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
  for (const Agent& agent : members_) {
    const int group_rank = static_cast<int>(done.nodes.size());
    done.nodes.push_back({agent.info.id, group_rank, done.world_size, agent.info.local_world_size});
    done.world_size += agent.info.local_world_size;
  }
  events.emplace_back(std::move(done));
}

// Survivors keep their order; spares take the free places first, in arrival
// order. The new round completes at once when it has min_nodes: every live
// agent is already here, so there is nobody to wait a last call for.
void ElasticRendezvous::reform(Clock::time_point now, Events& events) {
  ++round_;
  complete_ = false;
  last_call_deadline_.reset();
  forming_since_ = now;
  while (!spares_.empty() && static_cast<int>(members_.size()) < settings_.max_nodes) {
    members_.push_back(std::move(spares_.front()));
    members_.back().last_seen = now;
    spares_.erase(spares_.begin());
  }
  if (static_cast<int>(members_.size()) >= settings_.min_nodes) {
    completeRound(now, events);
    return;
  }
  events.emplace_back(RoundSuspended{round_, members()});
}

void ElasticRendezvous::removeEverywhere(const std::string& id, bool& was_member) {
  const auto matches = [&](const Agent& agent) { return agent.info.id == id; };
  const auto member = std::find_if(members_.begin(), members_.end(), matches);
  was_member = member != members_.end();
  if (was_member) {
    members_.erase(member);
  }
  std::erase_if(spares_, matches);
}

// --node-rank hints order the first round; agents without one follow in
// arrival order. Later rounds keep this order.
void ElasticRendezvous::orderFirstRound() {
  std::stable_sort(members_.begin(), members_.end(), [](const Agent& a, const Agent& b) {
    return a.info.rank_hint.value_or(INT_MAX) < b.info.rank_hint.value_or(INT_MAX);
  });
}

bool ElasticRendezvous::knows(const std::string& id) const { return findIn(*this, id) != nullptr; }

std::optional<ElasticRendezvous::Clock::time_point> ElasticRendezvous::lastSeen(
    const std::string& id) const {
  const Agent* agent = findIn(*this, id);
  return agent != nullptr ? std::optional<Clock::time_point>(agent->last_seen) : std::nullopt;
}

std::vector<std::string> ElasticRendezvous::rejoined() const {
  std::vector<std::pair<int, std::string>> back;
  if (restore_) {
    for (const auto& [group_rank, agent] : restore_->back) {
      back.emplace_back(group_rank, agent.info.id);
    }
  }
  std::sort(back.begin(), back.end());
  std::vector<std::string> ids;
  for (auto& entry : back) {
    ids.push_back(std::move(entry.second));
  }
  return ids;
}

ElasticRendezvous::Agent* ElasticRendezvous::find(const std::string& id) {
  return findIn(*this, id);
}

}  // namespace ddprun::rdzv

// A restarted rendezvous restoring its running round from the members'
// rejoins (see elastic_rendezvous.hpp): the restore's own part of
// ElasticRendezvous.
#include <algorithm>

#include "ddprun/rendezvous/elastic_rendezvous.hpp"

namespace ddprun::rdzv {

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
    // Nobody of that round is left: whoever arrived meanwhile starts afresh,
    // placed as a join is.
    for (AgentRef arrival : restore.arrivals) {
      place(arrival, now, events);
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

// Quarantine, ElasticRendezvous' part that keeps a host whose workers keep
// failing out of the job for a while (the rules: elastic_rendezvous.hpp).
//
// Blame. An agent asks for a restart the moment one of its workers fails
// (the agent's onExit), and the other nodes' workers fail, if at all, only
// because of it (their collectives break), later, so the first restart of a
// round to reach the rendezvous comes from the host whose worker failed
// first: that host is blamed. Every later restart names the round it failed
// in, which is no longer the running one, and blames nobody (restart()).
// Two hosts whose workers fail on their own within one round trip of each
// other are told apart by arrival only; an older agent, whose restart names
// no round, is blamed for whatever round is running.
//
// Hosts, not agents: an agent id is "<hostname>:<pid>", and an agent
// restarted on the same machine has a new id but the same host.
#include <algorithm>
#include <utility>

#include "ddprun/proto/rendezvous_status.hpp"
#include "ddprun/rendezvous/elastic_rendezvous.hpp"

namespace ddprun::rdzv {

// Called by restart() right before it re-forms the round, so the round the
// host is left out of is the next one.
void ElasticRendezvous::blame(AgentRef failed, Clock::time_point now, Events& events) {
  const std::string host = failed->host;
  HostRecord& record = hosts_[host];
  ++record.blamed;
  if (settings_.quarantine_after <= 0 || record.blamed < settings_.quarantine_after) {
    return;
  }
  // Never below min_nodes: the other hosts' agents that may run must make a
  // round without it; until they can, the host stays in (still blamed).
  // The held (elastic_cut_off.cpp) are members and spares too.
  int others = 0;
  const auto count = [&](const Heard& agents) {
    for (const Agent& agent : agents) {
      others += agent.host != host && !inQuarantine(agent, now) ? 1 : 0;
    }
  };
  count(heard_);
  if (cut_off_) {
    count(cut_off_->held);
  }
  if (others < settings_.min_nodes) {
    return;
  }
  record.failures = std::exchange(record.blamed, 0);
  record.until = now + settings_.quarantine_duration;
  quarantine_ends_.emplace(*record.until, host);
  HostQuarantined notice{host, record.failures, *record.until, round_ + 1, {}};
  // Its members stand by behind the spares already waiting.
  std::erase_if(members_, [&](AgentRef member) {
    if (member->host != host) {
      return false;
    }
    member->member = false;
    spares_.push_back(member);
    return true;
  });
  for (const AgentRef spare : spares_) {
    if (spare->host == host) {
      notice.agents.push_back(spare->info.id);
    }
  }
  events.emplace_back(std::move(notice));
}

void ElasticRendezvous::restoreQuarantine(const Quarantine& quarantine) {
  endQuarantine(quarantine.host);
  HostRecord& record = hosts_[quarantine.host];
  record.failures = quarantine.failures;
  record.until = quarantine.until;
  quarantine_ends_.emplace(quarantine.until, quarantine.host);
}

bool ElasticRendezvous::inQuarantine(const Agent& agent, Clock::time_point now) const {
  if (hosts_.empty()) {
    return false;  // nothing was ever blamed: the common case costs nothing
  }
  const auto record = hosts_.find(agent.host);
  return record != hosts_.end() && record->second.until && now < *record->second.until;
}

void ElasticRendezvous::endQuarantine(const std::string& host) {
  const auto record = hosts_.find(host);
  if (record == hosts_.end() || !record->second.until) {
    return;
  }
  quarantine_ends_.erase({*record->second.until, host});
  record->second.until.reset();
}

// Free places go to the spares in arrival order, passing over quarantined
// hosts' agents; below min_nodes the quarantined come back too, their
// hosts' quarantines ended (a running job matters more than a suspect
// host), and the agents of those hosts still standing by are told so.
void ElasticRendezvous::promoteSpares(Clock::time_point now, Events& events) {
  const auto fill = [&] {
    for (auto spare = spares_.begin();
         spare != spares_.end() && static_cast<int>(members_.size()) < settings_.max_nodes;) {
      if (inQuarantine(**spare, now)) {
        ++spare;
        continue;
      }
      const AgentRef promoted = *spare;
      spare = spares_.erase(spare);
      promoted->member = true;
      members_.push_back(promoted);
      if (!promoted->held) {
        hear(promoted, now);  // a held one proves nothing: it keeps the hold's grace
      }
    }
  };
  fill();
  std::vector<std::string> released;
  while (static_cast<int>(members_.size()) < settings_.min_nodes) {
    const auto quarantined = std::find_if(
        spares_.begin(), spares_.end(), [&](AgentRef spare) { return inQuarantine(*spare, now); });
    if (quarantined == spares_.end()) {
      break;
    }
    released.push_back((*quarantined)->host);
    endQuarantine(released.back());
    fill();
  }
  tellQuarantinesEnded(released, events);
}

// Its agents come back as newcomers would: below max_nodes the round
// re-forms with them at once.
void ElasticRendezvous::endQuarantinesDue(Clock::time_point now, Events& events) {
  std::vector<std::string> ended;
  while (!quarantine_ends_.empty() && quarantine_ends_.begin()->first <= now) {
    ended.push_back(quarantine_ends_.begin()->second);
    endQuarantine(ended.back());
  }
  if (ended.empty()) {
    return;
  }
  const bool room = static_cast<int>(members_.size()) < settings_.max_nodes;
  const bool waiting = std::any_of(spares_.begin(), spares_.end(),
                                   [&](AgentRef spare) { return !inQuarantine(*spare, now); });
  if (complete_ && room && waiting) {
    reform(now, events);
  }
  tellQuarantinesEnded(ended, events);
}

void ElasticRendezvous::tellQuarantinesEnded(const std::vector<std::string>& hosts,
                                             Events& events) const {
  for (const std::string& host : hosts) {
    QuarantineEnded ended{host, {}};
    for (const AgentRef spare : spares_) {
      if (spare->host == host) {
        ended.spares.push_back(spare->info.id);
      }
    }
    events.emplace_back(std::move(ended));
  }
}

std::optional<ElasticRendezvous::Clock::time_point> ElasticRendezvous::nextQuarantineEnd() const {
  if (quarantine_ends_.empty()) {
    return std::nullopt;
  }
  return quarantine_ends_.begin()->first;
}

std::vector<Quarantine> ElasticRendezvous::quarantined(Clock::time_point now) const {
  std::vector<Quarantine> hosts;
  for (const auto& [until, host] : quarantine_ends_) {
    if (now < until) {
      hosts.push_back({host, hosts_.find(host)->second.failures, until});
    }
  }
  return hosts;
}

std::optional<Quarantine> ElasticRendezvous::quarantineOf(std::string_view id,
                                                          Clock::time_point now) const {
  const std::string host = proto::rendezvous::agentHost(id);
  const auto record = hosts_.find(host);
  if (record == hosts_.end() || !record->second.until || now >= *record->second.until) {
    return std::nullopt;
  }
  return Quarantine{host, record->second.failures, *record->second.until};
}

int ElasticRendezvous::blamed(std::string_view host) const {
  const auto record = hosts_.find(host);
  return record == hosts_.end() ? 0 : record->second.blamed;
}

}  // namespace ddprun::rdzv

// A rendezvous cut off from its agents (its host's link down for longer than
// the keep-alive timeout, once TCP's retransmission backoff has stretched the
// cut): the silence is its own, so it loses nobody for it. The cut-off's own
// part of ElasticRendezvous (see elastic_rendezvous.hpp).
#include <algorithm>

#include "ddprun/rendezvous/elastic_rendezvous.hpp"

namespace ddprun::rdzv {
namespace {

// Linux caps a connection's retransmission timeout at 120 s (TCP_RTO_MAX):
// however long the silence, a connection's next retransmission comes within
// that once the link is back.
constexpr std::chrono::seconds kLongestRetransmissionWait{120};

}  // namespace

// A live agent is heard every keep_alive_interval, a third of the timeout by
// default: half of it with nobody heard at all is no one agent's silence.
bool ElasticRendezvous::cutOff(Clock::time_point now) const {
  return !heard_.empty() && now - heard_.back().last_seen > settings_.keep_alive_timeout / 2;
}

// Every agent is held, in last-heard order among those held already. The
// agents wait up to join_timeout past their own keep-alive bound for a silent
// rendezvous: it waits as long for them.
void ElasticRendezvous::holdAll() {
  const Clock::time_point since = heard_.back().last_seen;
  if (!cut_off_) {
    cut_off_ = CutOff{};  // assigned, not emplace()d: see rejoin()
    cut_off_->since = since;
  }
  for (Agent& agent : heard_) {
    agent.held = true;
  }
  cut_off_->held.merge(heard_,
                       [](const Agent& a, const Agent& b) { return a.last_seen < b.last_seen; });
  // A second cut while some are still held from the first: their connections
  // have backed off since the first one, so their grace counts from there
  // (`since` stays); the limit counts from this one.
  cut_off_->since = std::min(cut_off_->since, since);
  cut_off_->until = since + settings_.keep_alive_timeout + settings_.cut_off_limit;
  cut_off_->heard = false;
}

// Someone is heard: the link is back. TCP's retransmissions back off,
// doubling, so after a silence this long another connection's next one may
// come as long again after this (120 s at most): the held have that, and a
// keep-alive timeout, to be heard.
void ElasticRendezvous::heardAgain(Clock::time_point now) {
  if (!cut_off_ || cut_off_->heard) {
    return;
  }
  cut_off_->heard = true;
  const Clock::duration backoff =
      std::min<Clock::duration>(now - cut_off_->since, kLongestRetransmissionWait);
  cut_off_->until = now + backoff + settings_.keep_alive_timeout;
}

// `agent` goes back to heard_, at its back; the cut-off ends with its last.
void ElasticRendezvous::unhold(AgentRef agent) {
  agent->held = false;
  heard_.splice(heard_.end(), cut_off_->held, agent);
  if (cut_off_->held.empty()) {
    cut_off_.reset();
  }
}

std::size_t ElasticRendezvous::heldAgents() const { return cut_off_ ? cut_off_->held.size() : 0; }

}  // namespace ddprun::rdzv

#include "ddprun/rendezvous/exit_barrier.hpp"

#include <algorithm>

namespace ddprun::rdzv {

void ExitBarrier::record(std::string_view agent, std::int64_t round,
                         const ElasticRendezvous& rdzv) {
  if (round != round_) {
    round_ = round;
    done_.clear();
    done_members_ = 0;
    counted_ = false;
  }
  const bool added = done_.emplace(agent).second;
  if (added && counted_ && rdzv.isMember(agent)) {
    ++done_members_;
  }
}

bool ExitBarrier::reported(std::string_view agent, std::int64_t round) const {
  return round == round_ && done_.contains(agent);
}

std::optional<std::int64_t> ExitBarrier::due(const ElasticRendezvous& rdzv) {
  if (!rdzv.complete() || rdzv.round() != round_ || finished_round_ == round_) {
    return std::nullopt;
  }
  if (!counted_) {
    // Reports that came before the round completed (a restore, a rejoin
    // whose workers were done): counted once, from here on one by one.
    done_members_ = static_cast<std::size_t>(
        std::count_if(done_.begin(), done_.end(),
                      [&](const std::string& agent) { return rdzv.isMember(agent); }));
    counted_ = true;
  }
  if (done_members_ < rdzv.memberCount()) {
    return std::nullopt;
  }
  finished_round_ = round_;
  return round_;
}

}  // namespace ddprun::rdzv

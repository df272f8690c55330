// EtcdRendezvous and the quarantine of this agent's host: the coordinator
// decides it with the c10d daemon's state machine and writes the hosts it
// leaves out into each round's state (etcd_records.hpp); this agent reads
// its host there, says so once per round (quarantine_notice.hpp), and waits
// as a spare. Runs on the waiter thread (nextGroup() and its notices);
// watchQuarantine() on any.
#include "ddprun/launcher/etcd/etcd_rendezvous.hpp"
#include "ddprun/launcher/rendezvous/quarantine_notice.hpp"
#include "ddprun/launcher/rendezvous/wait_notice.hpp"

namespace ddprun::launcher {

// Its hostname is how the coordinator names it: agent ids are
// "<hostname>:<pid>" (proto::rendezvous::agentHost).
bool EtcdRendezvous::quarantinedBy(const etcd_rdzv::StateRecord& state) {
  const etcd_rdzv::QuarantineRecord* record = state.quarantineOf(host_);
  if (record == nullptr) {
    return false;
  }
  if (quarantine_round_ == state.round) {
    return true;
  }
  quarantine_round_ = state.round;
  quarantine_ = *record;
  quarantine_seen_ = std::chrono::steady_clock::now();
  left_out_ = true;
  const QuarantineNotice notice{record->host, record->failures,
                                std::chrono::milliseconds(record->left_ms)};
  sayQuarantined(notice, describe(), config_.min_nodes);
  std::lock_guard lock(quarantine_watch_mutex_);
  if (quarantine_watch_) {
    quarantine_watch_(notice);
  }
  return true;
}

std::string EtcdRendezvous::describeQuarantine() const {
  if (!quarantine_) {
    return "the end of this host's quarantine (standing by as a spare)";
  }
  const auto since = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - quarantine_seen_);
  const auto left = std::max(std::chrono::milliseconds(0),
                             std::chrono::milliseconds(quarantine_->left_ms) - since);
  return "the end of this host's quarantine in the " + describe() + " (" + describeSeconds(left) +
         " left), standing by as a spare";
}

void EtcdRendezvous::watchQuarantine(std::function<void(const QuarantineNotice&)> told) {
  std::lock_guard lock(quarantine_watch_mutex_);
  quarantine_watch_ = std::move(told);
}

}  // namespace ddprun::launcher

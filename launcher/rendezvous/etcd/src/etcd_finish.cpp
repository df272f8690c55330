// The end of an etcd rendezvous on this node: the exit barrier after a
// success, closing the job (the closed key) after a success everywhere or a
// failure here, and leaving (the lease revoked, so the others learn at once).
#include <thread>

#include "ddprun/launcher/core/log.hpp"
#include "ddprun/launcher/etcd/etcd_records.hpp"
#include "ddprun/launcher/etcd/etcd_rendezvous.hpp"
#include "ddprun/rendezvous/server.hpp"
#include "etcd_coordinator.hpp"
#include "etcd_lease.hpp"
#include "etcd_lease_watch.hpp"
#include "etcd_view.hpp"

namespace ddprun::launcher {
namespace {

using Clock = std::chrono::steady_clock;
constexpr std::chrono::seconds kExitBarrierTimeout{300};

// Whether every node of the round `state` holds has its done key for that
// round in `snapshot`.
bool everyNodeDone(const etcd_rdzv::EtcdView::Snapshot& snapshot, const etcd_rdzv::Keys& keys,
                   const etcd_rdzv::StateRecord& state) {
  for (const etcd_rdzv::NodeRecord& node : state.nodes) {
    const auto done = snapshot.find(keys.done(node.id));
    if (done == snapshot.end() || etcd_rdzv::decodeRound(done->second.value) != state.round) {
      return false;
    }
  }
  return true;
}

}  // namespace

int EtcdRendezvous::finishJob(const RunResult& result) {
  int status = result.exit_code;
  if (result.closed_elsewhere && joined_) {
    status = endedElsewhere(result);
  } else if (result.signal != 0 || !joined_ || result.left_unfit) {
    // Stopped by a signal, unfit, or never in the job: the job goes on
    // without this node (its lease is revoked below, so at once).
  } else if (result.exit_code != 0) {
    if (result.started) {
      closeJob(/*failed=*/true);  // restarts are spent here: every node stops
    }
  } else {
    switch (exitBarrier(kExitBarrierTimeout)) {
      case Barrier::kAllDone:
        closeJob(/*failed=*/false);
        break;
      case Barrier::kRoundMoved:
        log().error(
            "the job moved to a new round after this node's workers succeeded (a node was lost "
            "or joined); this node leaves it and cannot report the job a success");
        status = 1;
        break;
      case Barrier::kClosed:
        log().error("the job was closed before every node reported success");
        status = 1;
        break;
      case Barrier::kTimedOut:
        log().error("exit barrier: not every node finished within {} s; closing the job",
                    kExitBarrierTimeout.count());
        closeJob(/*failed=*/false);
        status = 1;
        break;
    }
  }
  leave();
  return status;
}

// This node's workers succeeded: says so, and waits until every node of the
// round has (or the round moves on, or the job is closed).
EtcdRendezvous::Barrier EtcdRendezvous::exitBarrier(std::chrono::milliseconds timeout) {
  const std::int64_t round = returned_;
  const auto deadline = Clock::now() + timeout;
  reportSuccess(round, deadline);
  std::optional<Barrier> outcome;
  while (!outcome && Clock::now() < deadline) {
    const std::int64_t seen = view_->revision();
    outcome = view_->read([&](const etcd_rdzv::EtcdView::Snapshot& snapshot) {
      return barrierOutcome(snapshot, round);
    });
    if (!outcome) {
      view_->waitForChange(seen, deadline);
    }
  }
  return outcome.value_or(Barrier::kTimedOut);
}

// This node's done key for `round`, under its lease; tried again (after a
// change or a third of the lease's TTL) until `deadline`.
void EtcdRendezvous::reportSuccess(std::int64_t round, Clock::time_point deadline) {
  while (Clock::now() < deadline) {
    try {
      client_.put(keys_->done(agent_id_), etcd_rdzv::encodeRound(round), lease_->id());
      return;
    } catch (const Error& error) {
      log().warn("could not report this node's success to etcd ({}); trying again", error.what());
      view_->waitForChange(view_->revision(), Clock::now() + lease_->ttl() / 3);
    }
  }
}

std::optional<EtcdRendezvous::Barrier> EtcdRendezvous::barrierOutcome(
    const etcd_rdzv::EtcdView::Snapshot& snapshot, std::int64_t round) const {
  if (const auto closed = snapshot.find(keys_->closed()); closed != snapshot.end()) {
    const auto record = etcd_rdzv::decodeClosed(closed->second.value);
    return record && !record->failed ? Barrier::kAllDone : Barrier::kClosed;
  }
  const auto state_kv = snapshot.find(keys_->state());
  const auto state =
      state_kv == snapshot.end() ? std::nullopt : etcd_rdzv::decodeState(state_kv->second.value);
  if (!state || state->round != round) {
    return Barrier::kRoundMoved;
  }
  if (!everyNodeDone(snapshot, *keys_, *state)) {
    return std::nullopt;
  }
  return Barrier::kAllDone;
}

// The closed key, written once (the first closer wins) under a short lease
// of its own, so the run id is free again soon after; the round's keys go
// with it. false when etcd could not be told.
bool EtcdRendezvous::closeJob(bool failed) {
  try {
    const std::int64_t lease = client_.grantLease(lease_->ttl());
    using Kind = etcd::Operation::Kind;
    client_.txn({{keys_->closed(), etcd::Compare::Target::kCreateRevision, 0}},
                {{Kind::kPut, keys_->closed(),
                  etcd_rdzv::encode(etcd_rdzv::ClosedRecord{failed, agent_id_}), lease},
                 {Kind::kDelete, keys_->state(), "", 0},
                 {Kind::kDelete, keys_->ready(), "", 0},
                 {Kind::kDeletePrefix, keys_->restarts(), "", 0},
                 {Kind::kDeletePrefix, keys_->dones(), "", 0}});
    return true;
  } catch (const Error& error) {
    log().error(
        "could not close the job in etcd ({}): the other nodes learn of it when this "
        "node's lease ends",
        error.what());
    return false;
  }
}

// Leaves the rendezvous: no more decisions here, the lease revoked (this
// node's keys go at once, and the others re-form without it now rather than
// after the TTL).
void EtcdRendezvous::leave() {
  {
    std::lock_guard lock(requests_mutex_);
    for (std::thread& request : requests_) {
      request.join();
    }
    requests_.clear();
  }
  lease_watch_.reset();
  coordinator_.reset();
  if (lease_) {
    lease_->revoke();
    lease_.reset();
  }
  {
    std::lock_guard lock(notify_mutex_);
    view_ready_ = false;
  }
  std::lock_guard lock(wait_mutex_);
  view_.reset();
}

}  // namespace ddprun::launcher

#include "etcd_lease_watch.hpp"

#include <algorithm>

#include "ddprun/launcher/core/log.hpp"

namespace ddprun::launcher::etcd_rdzv {
namespace {

// How often the watched set is read again from the view, and how long a
// failed question waits.
constexpr std::chrono::milliseconds kTurn{100};

}  // namespace

EtcdLeaseWatch::EtcdLeaseWatch(etcd::Client& client, EtcdView& view, Keys keys,
                               std::string agent_id)
    : client_(client), view_(view), keys_(std::move(keys)), agent_id_(std::move(agent_id)) {
  thread_ = std::thread([this] { run(); });
}

EtcdLeaseWatch::~EtcdLeaseWatch() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void EtcdLeaseWatch::run() {
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    lock.unlock();
    // The members' records are decoded again only when the view has moved:
    // the revision is read first, so a change that lands meanwhile is seen
    // again next turn.
    const std::int64_t revision = view_.revision();
    if (revision != followed_revision_) {
      follow(view_.read([this](const EtcdView::Snapshot& snapshot) {
        return leasesToWatch(snapshot, keys_, agent_id_);
      }));
      followed_revision_ = revision;
    }
    auto next = Clock::now() + kTurn;
    for (auto& [id, tracked] : tracked_) {
      if (!tracked.forgotten && tracked.ask_at <= Clock::now()) {
        ask(tracked);
      }
      if (!tracked.forgotten) {
        next = std::min(next, tracked.ask_at);
      }
    }
    lock.lock();
    wake_.wait_until(lock, next, [this] { return stopping_; });
  }
}

// Keeps exactly the leases to watch now: a new one is asked at once.
void EtcdLeaseWatch::follow(const std::vector<WatchedLease>& watched) {
  std::erase_if(tracked_, [&watched](const auto& entry) {
    return std::find(watched.begin(), watched.end(), entry.second.lease) == watched.end();
  });
  for (const WatchedLease& lease : watched) {
    tracked_.try_emplace(lease.lease, Tracked{lease, Clock::now()});
  }
}

void EtcdLeaseWatch::ask(Tracked& tracked) {
  const auto asked = Clock::now();
  try {
    const LeaseStep step =
        judgeLease(client_.timeToLive(tracked.lease.lease), tracked.lease.declared_ttl_s);
    switch (step.kind) {
      case LeaseStep::Kind::kForget:
        tracked.forgotten = true;
        return;
      case LeaseStep::Kind::kAskAgain:
        tracked.ask_at = asked + step.after;
        return;
      case LeaseStep::Kind::kRevoke:
        revoke(tracked);
        return;
    }
  } catch (const Error& error) {
    log().debug("could not ask etcd about {}'s lease: {}", tracked.lease.agent, error.what());
    tracked.ask_at = Clock::now() + kTurn;
  }
}

// Only while the key it was watched for still stands on it: a lease that
// changed hands in the meantime is watched afresh.
void EtcdLeaseWatch::revoke(Tracked& tracked) {
  const bool stands = view_.read([&tracked](const EtcdView::Snapshot& snapshot) {
    return stillStands(snapshot, tracked.lease);
  });
  if (!stands) {
    tracked.forgotten = true;
    return;
  }
  client_.revokeLease(tracked.lease.lease);  // throws: asked again next turn
  tracked.forgotten = true;
  log().warn(
      "{} has not renewed its etcd lease for {} s (etcd's own clock): revoked it, so the "
      "rendezvous goes on without it now rather than at etcd's next expiry scan",
      tracked.lease.agent, tracked.lease.declared_ttl_s);
}

}  // namespace ddprun::launcher::etcd_rdzv

#include "etcd_lease.hpp"

#include "ddprun/launcher/core/log.hpp"
#include "ddprun/launcher/etcd/etcd_lease_verdict.hpp"

namespace ddprun::launcher::etcd_rdzv {

EtcdLease::EtcdLease(etcd::Client& client, std::chrono::seconds ttl,
                     std::chrono::milliseconds interval,
                     std::function<void(std::int64_t lease)> registered,
                     std::function<std::int64_t()> shared)
    : client_(client),
      ttl_(ttl),
      // At least three renewals per lease, as etcd's own client does: with
      // keep_alive_max_attempt 1 a renewal every interval would race the
      // expiry it is meant to prevent.
      interval_(std::min(interval, std::chrono::duration_cast<std::chrono::milliseconds>(ttl) / 3)),
      registered_(std::move(registered)),
      shared_(std::move(shared)) {
  id_ = client_.grantLease(grantedLeaseTtl(ttl_));
  thread_ = std::thread([this] { renew(); });
}

EtcdLease::~EtcdLease() { stop(); }

void EtcdLease::stop() {
  {
    std::lock_guard lock(mutex_);
    if (stopping_) {
      return;
    }
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void EtcdLease::revoke() {
  stop();
  try {
    client_.revokeLease(id_);
  } catch (const Error& error) {
    log().debug("could not revoke the etcd lease: {}", error.what());
  }
}

void EtcdLease::renew() {
  bool unavailable = false;
  std::unique_lock lock(mutex_);
  while (!wake_.wait_for(lock, interval_, [this] { return stopping_; })) {
    lock.unlock();
    renewOnce(unavailable);
    lock.lock();
  }
}

void EtcdLease::renewOnce(bool& unavailable) {
  try {
    const bool alive = client_.keepAlive(id_);
    if (const std::int64_t shared = shared_ ? shared_() : 0; shared != 0) {
      client_.keepAlive(shared);  // gone: the coordinator grants the next one
    }
    if (unavailable) {
      log().info("etcd at {} serves again{}", client_.describe(),
                 alive ? "; this node's lease held" : "");
      unavailable = false;
    }
    if (!alive) {
      log().warn(
          "this node's etcd lease expired (etcd could not renew it within {} s): registering "
          "again; the rendezvous counts this node as a newcomer",
          ttl_.count());
      id_ = client_.grantLease(grantedLeaseTtl(ttl_));
      registered_(id_);
    }
  } catch (const Error& error) {
    if (!unavailable) {
      log().warn(
          "etcd cannot renew this node's lease ({}): the workers keep running; retrying every "
          "{} ms",
          error.what(), interval_.count());
      unavailable = true;
    }
  }
}

}  // namespace ddprun::launcher::etcd_rdzv

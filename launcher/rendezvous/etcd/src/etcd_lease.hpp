// This agent's lease in etcd: every key that says the agent is alive (its
// membership, the election key while it coordinates) is held under it, so
// the agent's death is the lease going unrenewed for keep_alive_interval x
// keep_alive_max_attempt (its TTL), with no other node's clock involved:
// etcd expires it a second later (the lease is granted that margin), or
// another agent revokes it once etcd says the TTL has passed
// (etcd_lease_verdict.hpp).
//
// Owns the lease and the thread that renews it every keep_alive_interval (or
// a third of the TTL, if that is shorter).
// While etcd cannot renew it (no quorum, every member unreachable) the
// thread says so once and keeps trying; the agent's workers go on. etcd
// extends every lease when a new leader is elected, so a lease usually
// survives a quorum loss; when it did not, the thread takes a new one and
// calls `registered` with it (on the lease thread) so the agent writes its
// keys again. Destruction stops the thread without revoking; revoke() ends
// the lease at once (the others learn of this agent's exit without waiting
// for the TTL). `shared()`, when it names one, is another lease renewed
// with this one: the run's, which every agent keeps alive
// (etcd_coordinator.hpp).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>

#include "ddprun/launcher/etcd/etcd_client.hpp"

namespace ddprun::launcher::etcd_rdzv {

class EtcdLease {
 public:
  // Grants the lease (throws EtcdUnavailable when no member serves it) and
  // starts renewing it.
  EtcdLease(etcd::Client& client, std::chrono::seconds ttl, std::chrono::milliseconds interval,
            std::function<void(std::int64_t lease)> registered,
            std::function<std::int64_t()> shared = {});
  ~EtcdLease();
  EtcdLease(const EtcdLease&) = delete;
  EtcdLease& operator=(const EtcdLease&) = delete;

  std::int64_t id() const { return id_.load(); }
  std::chrono::seconds ttl() const { return ttl_; }
  // Stops renewing and revokes the lease (best effort: etcd may be gone).
  void revoke();

 private:
  void renew();
  void renewOnce(bool& unavailable);
  void stop();

  etcd::Client& client_;
  std::chrono::seconds ttl_;
  std::chrono::milliseconds interval_;
  std::function<void(std::int64_t)> registered_;
  std::function<std::int64_t()> shared_;  // 0: none now
  std::atomic<std::int64_t> id_{0};

  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace ddprun::launcher::etcd_rdzv

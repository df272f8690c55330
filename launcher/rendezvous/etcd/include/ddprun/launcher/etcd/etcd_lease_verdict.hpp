// How a survivor judges another agent's lease from etcd's own account of it,
// so that a lost agent is known when its keep-alive bound has passed, not up
// to a second later when etcd's lessor next scans for expired leases (every
// 500 ms, then a revocation through raft).
//
// An agent whose keep-alive bound is TTL >= 2 s is granted a lease of
// TTL + 1 s and renews it as often as before. etcd's LeaseTimeToLive gives
// the seconds left rounded toward zero, so it reads 0 exactly when the lease
// has had no renewal for more than TTL by the leader's own clock: the agent
// is then lost under the contract it declared, and any agent may revoke the
// lease (etcd deletes its keys at once; the watch tells everyone). No
// agent's clock is compared with another's; a late renewal is judged by
// etcd when it lands, so a live agent is never revoked early. A TTL of 1 s
// has no margin (its readings would sit at 1 and ask for a poll every few
// milliseconds): such leases are left to etcd's own expiry.
//
// Who watches whom: the coordinator watches every other member; the first
// two other members (by when they registered) watch the coordinator.
//
// Plain values and pure functions; no I/O.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ddprun/launcher/etcd/etcd_client.hpp"
#include "ddprun/launcher/etcd/etcd_records.hpp"

namespace ddprun::launcher::etcd_rdzv {

// The TTL to ask etcd for, for a keep-alive bound of `ttl`.
std::chrono::seconds grantedLeaseTtl(std::chrono::seconds ttl);
// The bound to declare in MemberRecord::lease_ttl_s: 0 when the lease has
// no margin.
std::int64_t declaredLeaseTtl(std::chrono::seconds ttl);

// One lease this agent watches, with the key that says it is alive (the
// member key, or the coordinator's election key) as it was when chosen.
struct WatchedLease {
  std::string agent;
  std::string key;
  std::int64_t create_revision = 0;
  std::int64_t lease = 0;
  std::int64_t declared_ttl_s = 0;
  bool operator==(const WatchedLease&) const = default;
};

// The leases `agent_id` watches in `snapshot` (a run's keys: EtcdView's).
std::vector<WatchedLease> leasesToWatch(const std::map<std::string, etcd::KeyValue>& snapshot,
                                        const Keys& keys, const std::string& agent_id);

// Whether `watched` still stands in `snapshot`: the same key, registered at
// the same revision, under the same lease.
bool stillStands(const std::map<std::string, etcd::KeyValue>& snapshot,
                 const WatchedLease& watched);

// What to do after a reading (nullopt: etcd has no such lease). `after` is
// from when the reading was asked: by then the lease may have been
// unrenewed for the declared TTL at the earliest.
struct LeaseStep {
  enum class Kind { kForget, kRevoke, kAskAgain };
  Kind kind = Kind::kAskAgain;
  std::chrono::milliseconds after{0};
};
LeaseStep judgeLease(const std::optional<etcd::Client::LeaseTime>& reading,
                     std::int64_t declared_ttl_s);

// How often a lease that reads 1 s left is asked again: the recovery's
// resolution beyond the TTL.
inline constexpr std::chrono::milliseconds kCloseWatchInterval{20};

}  // namespace ddprun::launcher::etcd_rdzv

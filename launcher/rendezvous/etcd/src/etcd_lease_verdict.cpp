#include "ddprun/launcher/etcd/etcd_lease_verdict.hpp"

#include <algorithm>

namespace ddprun::launcher::etcd_rdzv {
namespace {

// Below this bound a lease gets no margin (see the header).
constexpr std::chrono::seconds kSmallestJudgedTtl{2};
constexpr std::chrono::seconds kMargin{1};

std::optional<WatchedLease> memberLease(const etcd::KeyValue& kv) {
  const auto record = decodeMember(kv.value);
  if (!record || record->lease_ttl_s < kSmallestJudgedTtl.count() || kv.lease == 0) {
    return std::nullopt;
  }
  return WatchedLease{record->id, kv.key, kv.create_revision, kv.lease, record->lease_ttl_s};
}

// The members other than the coordinator, oldest registration first.
std::vector<const etcd::KeyValue*> otherMembers(
    const std::map<std::string, etcd::KeyValue>& snapshot, const Keys& keys,
    const std::string& coordinator) {
  std::vector<const etcd::KeyValue*> members;
  for (auto it = snapshot.lower_bound(keys.members());
       it != snapshot.end() && it->first.starts_with(keys.members()); ++it) {
    if (it->first != keys.member(coordinator)) {
      members.push_back(&it->second);
    }
  }
  std::sort(members.begin(), members.end(),
            [](const auto* a, const auto* b) { return a->create_revision < b->create_revision; });
  return members;
}

// The coordinator's lease, for one of the first two other members.
std::vector<WatchedLease> coordinatorLease(const std::map<std::string, etcd::KeyValue>& snapshot,
                                           const Keys& keys, const std::string& agent_id,
                                           const etcd::KeyValue& election) {
  const auto members = otherMembers(snapshot, keys, election.value);
  const auto watchers = std::min<std::ptrdiff_t>(std::ssize(members), 2);
  const bool watching =
      std::any_of(members.begin(), members.begin() + watchers,
                  [&](const auto* kv) { return kv->key == keys.member(agent_id); });
  const auto own = snapshot.find(keys.member(election.value));
  if (!watching || own == snapshot.end() || own->second.lease != election.lease) {
    return {};
  }
  auto lease = memberLease(own->second);
  if (!lease) {
    return {};
  }
  lease->key = election.key;
  lease->create_revision = election.create_revision;
  return {*lease};
}

}  // namespace

std::chrono::seconds grantedLeaseTtl(std::chrono::seconds ttl) {
  return ttl >= kSmallestJudgedTtl ? ttl + kMargin : ttl;
}

std::int64_t declaredLeaseTtl(std::chrono::seconds ttl) {
  return ttl >= kSmallestJudgedTtl ? ttl.count() : 0;
}

std::vector<WatchedLease> leasesToWatch(const std::map<std::string, etcd::KeyValue>& snapshot,
                                        const Keys& keys, const std::string& agent_id) {
  const auto election = snapshot.find(keys.coordinator());
  if (election == snapshot.end() || election->second.lease == 0) {
    return {};
  }
  if (election->second.value != agent_id) {
    return coordinatorLease(snapshot, keys, agent_id, election->second);
  }
  std::vector<WatchedLease> watched;
  for (const etcd::KeyValue* kv : otherMembers(snapshot, keys, agent_id)) {
    if (auto lease = memberLease(*kv)) {
      watched.push_back(*lease);
    }
  }
  return watched;
}

bool stillStands(const std::map<std::string, etcd::KeyValue>& snapshot,
                 const WatchedLease& watched) {
  const auto it = snapshot.find(watched.key);
  return it != snapshot.end() && it->second.create_revision == watched.create_revision &&
         it->second.lease == watched.lease;
}

LeaseStep judgeLease(const std::optional<etcd::Client::LeaseTime>& reading,
                     std::int64_t declared_ttl_s) {
  using Kind = LeaseStep::Kind;
  // Not a lease with this module's margin (an older agent, or etcd raised
  // the TTL to its minimum): its reading says nothing about the bound.
  if (!reading || declared_ttl_s < kSmallestJudgedTtl.count() ||
      reading->granted_ttl != declared_ttl_s + kMargin.count()) {
    return {Kind::kForget, {}};
  }
  if (reading->ttl <= 0) {
    return {Kind::kRevoke, {}};
  }
  if (reading->ttl == 1) {
    return {Kind::kAskAgain, kCloseWatchInterval};
  }
  // At least `ttl` s left when asked: not 1 s left before ttl - 1 s.
  return {Kind::kAskAgain, std::chrono::seconds(reading->ttl - 1)};
}

}  // namespace ddprun::launcher::etcd_rdzv

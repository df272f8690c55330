#include "etcd_coordinator.hpp"

#include <algorithm>
#include <variant>
#include <vector>

#include "ddprun/launcher/core/log.hpp"

namespace ddprun::launcher::etcd_rdzv {
namespace {

using Snapshot = EtcdView::Snapshot;

// Liveness is the members' leases: the machine's own keep-alive clock must
// never expire anyone, so it is set beyond any job's life.
constexpr std::chrono::hours kNeverSilent{24 * 365};

struct LiveMember {
  MemberRecord record;
  std::int64_t joined_at = 0;  // its key's create revision: etcd's arrival order
};

// The members whose keys exist now, in arrival order.
std::vector<LiveMember> liveMembers(const Snapshot& snapshot, const Keys& keys) {
  std::vector<LiveMember> live;
  for (auto it = snapshot.lower_bound(keys.members());
       it != snapshot.end() && it->first.starts_with(keys.members()); ++it) {
    if (auto record = decodeMember(it->second.value)) {
      live.push_back({std::move(*record), it->second.create_revision});
    }
  }
  std::sort(live.begin(), live.end(),
            [](const LiveMember& a, const LiveMember& b) { return a.joined_at < b.joined_at; });
  return live;
}

rdzv::AgentInfo agentInfo(const MemberRecord& record, std::int64_t round_floor) {
  return {record.id, record.local_world_size, record.rank_hint,
          std::max(record.last_round, round_floor)};
}

const etcd::KeyValue* find(const Snapshot& snapshot, const std::string& key) {
  const auto it = snapshot.find(key);
  return it == snapshot.end() ? nullptr : &it->second;
}

// The restart keys in the order etcd committed their last writes, not in
// the keys' order: the first restart of a round is the host its failure is
// blamed on (elastic_quarantine.cpp).
std::vector<std::pair<std::string, const etcd::KeyValue*>> restartsInOrder(const Snapshot& snapshot,
                                                                           const Keys& keys) {
  std::vector<std::pair<std::string, const etcd::KeyValue*>> restarts;
  for (auto it = snapshot.lower_bound(keys.restarts());
       it != snapshot.end() && it->first.starts_with(keys.restarts()); ++it) {
    restarts.emplace_back(it->first, &it->second);
  }
  std::sort(restarts.begin(), restarts.end(), [](const auto& a, const auto& b) {
    return a.second->mod_revision < b.second->mod_revision;
  });
  return restarts;
}

}  // namespace

EtcdCoordinator::EtcdCoordinator(etcd::Client& client, EtcdView& view, Keys keys,
                                 std::string agent_id, rdzv::ElasticSettings settings,
                                 std::function<std::int64_t()> lease,
                                 std::chrono::seconds state_ttl, std::chrono::milliseconds retry)
    : client_(client),
      view_(view),
      keys_(std::move(keys)),
      agent_id_(std::move(agent_id)),
      settings_(settings),
      lease_(std::move(lease)),
      state_ttl_(state_ttl),
      retry_(retry) {
  settings_.keep_alive_timeout = kNeverSilent;
  thread_ = std::thread([this] { run(); });
}

EtcdCoordinator::~EtcdCoordinator() {
  {
    std::lock_guard lock(pause_mutex_);  // no pause() misses the wake-up
    stopping_ = true;
  }
  pause_.notify_all();
  view_.wake();
  thread_.join();
}

void EtcdCoordinator::run() {
  while (!stopping_) {
    try {
      if (const auto elected = campaign()) {
        lead(*elected);
      }
      if (view_.read([&](const Snapshot& s) { return find(s, keys_.closed()) != nullptr; })) {
        leading_ = false;
        pauseUntilStopped();  // the job is over: nothing is left to decide
      }
    } catch (const Error& error) {
      // etcd unavailable (no quorum): whoever leads when it is back decides.
      log().debug("coordinator: {}", error.what());
      pause();
    }
    leading_ = false;
  }
}

// One try at the election key, then waits until it is free. The revision our
// key was created at, once we hold it.
std::optional<std::int64_t> EtcdCoordinator::campaign() {
  const std::string key = keys_.coordinator();
  // Another agent leads, as far as the view knows: no transaction (a write
  // every cluster member must commit) until its key goes.
  for (;;) {
    const std::int64_t seen = view_.revision();
    const bool held_by_another = view_.read([&](const Snapshot& s) {
      const etcd::KeyValue* held = find(s, key);
      return held != nullptr && held->value != agent_id_;
    });
    if (stopping_ || !held_by_another) {
      break;
    }
    view_.waitForChange(seen, Clock::now() + retry_);
  }
  if (stopping_) {
    return std::nullopt;
  }
  const etcd::TxnResult result =
      client_.txn({{keys_.coordinator(), etcd::Compare::Target::kCreateRevision, 0}},
                  {{etcd::Operation::Kind::kPut, keys_.coordinator(), agent_id_, lease_()}});
  if (result.succeeded) {
    return result.revision;
  }
  // The view, once it has caught up with the transaction, says who holds it.
  waitForView(result.revision);
  const std::optional<std::int64_t> ours = view_.read([&](const Snapshot& s) {
    const etcd::KeyValue* held = find(s, key);
    return held != nullptr && held->value == agent_id_ && held->lease == lease_()
               ? std::optional(held->create_revision)
               : std::nullopt;
  });
  if (ours) {
    return ours;  // ours already (we stepped down to rebuild)
  }
  // Someone else leads: wait until its key goes (its lease ended).
  while (!stopping_ && !view_.waitUntil([&](const Snapshot& s) { return find(s, key) == nullptr; },
                                        Clock::now() + retry_)) {
  }
  return std::nullopt;
}

void EtcdCoordinator::lead(std::int64_t election_revision) {
  election_revision_ = election_revision;
  waitForView(election_revision);
  rdzv::ElasticRendezvous machine(settings_);
  restarts_seen_.clear();
  rdzv::Events events;
  std::int64_t seen = view_.revision();
  Snapshot snapshot = view_.read([](const Snapshot& s) { return s; });
  if (find(snapshot, keys_.closed()) != nullptr || !stillElected(snapshot)) {
    return;
  }
  leading_ = true;
  log().info("coordinating the etcd rendezvous");
  restore(machine, snapshot, events);
  for (;;) {
    if (!events.empty() && !write(events, snapshot, machine)) {
      return;  // deposed, or the state moved under us: campaign again
    }
    events.clear();
    prepareStateLease();
    // Woken by a change, the machine's next deadline (a last call), the
    // prepared lease's renewal, or stop.
    auto wake = machine.nextDeadline().value_or(Clock::now() + std::chrono::hours(24));
    if (first_round_pending_) {
      // Never sooner than a fraction of the period: a renewal slower than
      // that must not turn this wait into a loop of requests.
      wake = std::min(wake, std::max(prepared_at_ + preparedLeasePeriod(),
                                     Clock::now() + preparedLeasePeriod() / 4));
    }
    view_.waitForChange(seen, wake);
    if (stopping_) {
      return;
    }
    seen = view_.revision();
    snapshot = view_.read([](const Snapshot& s) { return s; });
    if (!stillElected(snapshot)) {
      log().info("no longer coordinating the etcd rendezvous");
      return;
    }
    if (find(snapshot, keys_.closed()) != nullptr) {
      return;  // the job is over: nothing more to decide
    }
    follow(machine, snapshot, events);
    const rdzv::Events due = machine.tick(Clock::now());
    events.insert(events.end(), due.begin(), due.end());
  }
}

// The state machine as etcd says the job stands: the last decided round goes
// on with those of its members still alive (at once, without them if any is
// lost), and every other live member joins, in etcd's arrival order.
void EtcdCoordinator::restore(rdzv::ElasticRendezvous& machine, const Snapshot& snapshot,
                              rdzv::Events& events) {
  const etcd::KeyValue* state_kv = find(snapshot, keys_.state());
  const std::optional<StateRecord> state = state_kv ? decodeState(state_kv->value) : std::nullopt;
  state_revision_ = state_kv ? state_kv->mod_revision : 0;
  first_round_pending_ = state_kv == nullptr;  // no round was ever decided in this run
  const std::int64_t floor = state ? state->round : -1;
  const auto now = Clock::now();
  const auto live = liveMembers(snapshot, keys_);
  const bool running = state && !state->suspended;
  joined_at_.clear();
  for (const LiveMember& member : live) {
    joined_at_[member.record.id] = member.joined_at;
  }
  // The deposed coordinator's quarantines hold on, from now: the time since
  // it wrote them is not known, so they may last up to that much longer.
  for (const QuarantineRecord& host :
       state ? state->quarantined : std::vector<QuarantineRecord>{}) {
    machine.restoreQuarantine(
        {host.host, host.failures, now + std::chrono::milliseconds(host.left_ms)});
  }
  for (const LiveMember& member : live) {
    const NodeRecord* node = running ? state->find(member.record.id) : nullptr;
    if (node != nullptr) {
      const int world = static_cast<int>(state->nodes.size());
      machine.rejoin(agentInfo(member.record, floor), {state->round, node->group_rank, world}, now,
                     events);
    }
  }
  for (const LiveMember& member : live) {
    if (!running || state->find(member.record.id) == nullptr) {
      machine.join(agentInfo(member.record, floor), now, events);
    }
  }
  const rdzv::Events restored = machine.endRestore(now);
  events.insert(events.end(), restored.begin(), restored.end());
  // Restart requests already made: those for the running round still count.
  for (const auto& [key, value] : restartsInOrder(snapshot, keys_)) {
    restarts_seen_[key] = value->mod_revision;
    const auto round = decodeRound(value->value);
    if (round && *round == machine.round() && machine.complete()) {
      const auto id = key.substr(keys_.restarts().size());
      const rdzv::Events restarted = machine.restart(id, now, round);
      events.insert(events.end(), restarted.begin(), restarted.end());
    }
  }
}

// What changed since the last look: new members join, vanished ones are
// lost, new restart requests for the running round restart it.
void EtcdCoordinator::follow(rdzv::ElasticRendezvous& machine, const Snapshot& snapshot,
                             rdzv::Events& events) {
  const auto now = Clock::now();
  const auto live = liveMembers(snapshot, keys_);
  std::vector<std::string> known = machine.members();
  const std::vector<std::string> spares = machine.spares();
  known.insert(known.end(), spares.begin(), spares.end());
  for (const std::string& id : known) {
    // The same key, not just the same id: one that went (its lease lost)
    // and came back between two looks is a loss and a join.
    const bool alive = std::any_of(live.begin(), live.end(), [&](const LiveMember& m) {
      return m.record.id == id && m.joined_at == joined_at_[id];
    });
    if (!alive) {
      joined_at_.erase(id);
      const rdzv::Events lost = machine.lose(id, now);
      events.insert(events.end(), lost.begin(), lost.end());
    }
  }
  for (const LiveMember& member : live) {
    if (!machine.knows(member.record.id)) {
      joined_at_[member.record.id] = member.joined_at;
      machine.join(agentInfo(member.record, -1), now, events);
    }
  }
  for (const auto& [key, value] : restartsInOrder(snapshot, keys_)) {
    std::int64_t& seen = restarts_seen_[key];
    if (value->mod_revision <= seen) {
      continue;
    }
    seen = value->mod_revision;
    const auto round = decodeRound(value->value);
    if (round && *round == machine.round()) {
      const rdzv::Events restarted =
          machine.restart(key.substr(keys_.restarts().size()), now, round);
      events.insert(events.end(), restarted.begin(), restarted.end());
    }
  }
}

bool EtcdCoordinator::stillElected(const Snapshot& snapshot) const {
  const etcd::KeyValue* held = find(snapshot, keys_.coordinator());
  return held != nullptr && held->value == agent_id_ && held->create_revision == election_revision_;
}

// The newest decision among `events`, written on the state key as read, only
// while our election key is the one we created. A completed round says
// which hosts are quarantined, so their agents know why they stand by.
bool EtcdCoordinator::write(const rdzv::Events& events, const Snapshot& snapshot,
                            const rdzv::ElasticRendezvous& machine) {
  std::optional<StateRecord> state;
  for (const rdzv::RendezvousEvent& event : events) {
    if (const auto* done = std::get_if<rdzv::RoundCompleted>(&event)) {
      StateRecord record{done->round, false, first_round_pending_, done->world_size, {}};
      for (const rdzv::NodeAssignment& node : done->nodes) {
        MemberRecord member;
        if (const etcd::KeyValue* kv = find(snapshot, keys_.member(node.id))) {
          member = decodeMember(kv->value).value_or(member);
        }
        record.nodes.push_back({node.id, node.group_rank, node.base_rank, node.local_world_size,
                                member.store_host, member.store_port});
      }
      const auto now = Clock::now();
      for (const rdzv::Quarantine& host : machine.quarantined(now)) {
        record.quarantined.push_back(
            {host.host, host.failures,
             std::chrono::ceil<std::chrono::milliseconds>(host.until - now).count()});
      }
      state = std::move(record);
    } else if (const auto* suspended = std::get_if<rdzv::RoundSuspended>(&event)) {
      state = StateRecord{suspended->round, true, false, 0, {}};
    }
  }
  if (!state) {
    return true;
  }
  const std::int64_t lease = stateLease(snapshot);
  const etcd::TxnResult result = client_.txn(
      {{keys_.coordinator(), etcd::Compare::Target::kCreateRevision, election_revision_},
       {keys_.state(), etcd::Compare::Target::kModRevision, state_revision_}},
      {{etcd::Operation::Kind::kPut, keys_.state(), encode(*state), lease}});
  if (!result.succeeded) {
    return false;
  }
  state_revision_ = result.revision;
  first_round_pending_ = false;
  renewUsedPreparedLease(lease);
  log().info("etcd rendezvous: round {} {}", state->round,
             state->suspended ? "suspended (below min_nodes)"
                              : "formed with " + std::to_string(state->nodes.size()) + " node(s)");
  return true;
}

// The run's lease the state lives on: the one it has, or, for a run's first
// state (or one whose every agent was gone past the TTL), a new one.
std::int64_t EtcdCoordinator::stateLease(const Snapshot& snapshot) {
  if (const etcd::KeyValue* state = find(snapshot, keys_.state()); state && state->lease != 0) {
    return state->lease;
  }
  if (preparedLeaseFresh()) {
    return prepared_lease_;
  }
  return client_.grantLease(state_ttl_);
}

// Renewed (or granted) less than half a TTL ago, so certainly alive.
bool EtcdCoordinator::preparedLeaseFresh() const {
  return prepared_lease_ != 0 && Clock::now() < prepared_at_ + preparedLeasePeriod();
}

// Half the state's TTL, in ms (a TTL of 1 s is 500 ms, not 0).
std::chrono::milliseconds EtcdCoordinator::preparedLeasePeriod() const {
  return std::chrono::duration_cast<std::chrono::milliseconds>(state_ttl_) / 2;
}

// The first state went out on the lease prepared ahead, which may have had
// only half its TTL left: renewed once now, after the decision, it has a
// whole TTL again, as a lease granted with the state had, until the agents'
// renewals take over.
void EtcdCoordinator::renewUsedPreparedLease(std::int64_t used) {
  if (used != prepared_lease_) {
    return;
  }
  prepared_lease_ = 0;
  try {
    client_.keepAlive(used);
  } catch (const Error& error) {
    log().debug("coordinator: renewing the state's lease: {}", error.what());
  }
}

// Before the run's first state, its lease is granted ahead, while the
// coordinator waits for the members: the round's decision is then one write,
// not a grant and a write. It is renewed every half TTL until then, so it is
// always used within half a TTL of its last renewal, which it cannot have
// outlived (etcd only ever extends a lease's life, at a new leader). The
// times are taken before each request: etcd's own start of the TTL is later.
// After the write it is renewed once more (renewUsedPreparedLease).
void EtcdCoordinator::prepareStateLease() {
  if (!first_round_pending_) {
    prepared_lease_ = 0;
    return;
  }
  if (preparedLeaseFresh()) {
    return;
  }
  prepared_at_ = Clock::now();  // a failed try is tried again a period later, not at once
  try {
    if (prepared_lease_ == 0 || !client_.keepAlive(prepared_lease_)) {
      prepared_lease_ = client_.grantLease(state_ttl_);
    }
  } catch (const Error& error) {
    // etcd unavailable: the state's write grants its own lease, as it would
    // have without this, and the rounds being formed are not disturbed.
    prepared_lease_ = 0;
    log().debug("coordinator: preparing the state's lease: {}", error.what());
  }
}

// Until the view has caught up with `revision` (or we stop).
void EtcdCoordinator::waitForView(std::int64_t revision) {
  for (std::int64_t seen = view_.revision(); !stopping_ && seen < revision;
       seen = view_.revision()) {
    view_.waitForChange(seen, Clock::now() + retry_);
  }
}

void EtcdCoordinator::pause() {
  std::unique_lock lock(pause_mutex_);
  pause_.wait_for(lock, retry_, [this] { return stopping_.load(); });
}

void EtcdCoordinator::pauseUntilStopped() {
  std::unique_lock lock(pause_mutex_);
  pause_.wait(lock, [this] { return stopping_.load(); });
}

}  // namespace ddprun::launcher::etcd_rdzv

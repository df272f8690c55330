#include "ddprun/launcher/etcd/etcd_rendezvous.hpp"

#include <unistd.h>

#include <climits>

#include "ddprun/launcher/core/log.hpp"
#include "ddprun/launcher/etcd/etcd_lease_verdict.hpp"
#include "ddprun/launcher/etcd/etcd_records.hpp"
#include "ddprun/launcher/host/socket_interface.hpp"
#include "ddprun/launcher/rendezvous/quarantine_notice.hpp"
#include "ddprun/launcher/rendezvous/store_peer_channel.hpp"
#include "ddprun/launcher/rendezvous/wait_notice.hpp"
#include "ddprun/proto/errors.hpp"
#include "ddprun/rendezvous/server.hpp"
#include "etcd_coordinator.hpp"
#include "etcd_lease.hpp"
#include "etcd_lease_watch.hpp"
#include "etcd_view.hpp"

namespace ddprun::launcher {
namespace {

using etcd_rdzv::EtcdView;
using Clock = std::chrono::steady_clock;

constexpr const char* kDefaultPrefix = "/ddprun/rendezvous";

std::string confValue(const RdzvConf& conf, std::initializer_list<const char*> names) {
  for (const char* name : names) {
    if (const auto it = conf.etcd.find(name); it != conf.etcd.end()) {
      return it->second;
    }
  }
  return "";
}

// The lease's TTL: the keep-alive bound, in whole seconds (etcd's unit).
std::chrono::seconds leaseTtl(const RdzvConf& conf) {
  const auto bound = conf.keepAliveInterval() * conf.keepAliveMaxAttempt();
  return std::max(std::chrono::seconds(1), std::chrono::ceil<std::chrono::seconds>(bound));
}

// The address other nodes reach this host's workers' store at: --local-addr,
// else the one this host reaches etcd from (the job's network).
std::string storeHost(const LaunchConfig& config, const etcd::ClientOptions& options) {
  if (config.local_addr && !config.local_addr->empty()) {
    return *config.local_addr;
  }
  const NetworkProbe probe = systemNetwork();
  for (const etcd::Member& member : options.members) {
    for (const IpAddress& peer : probe.resolve(member.host)) {
      std::string why;
      if (const auto source = probe.source_address(peer, member.port, why)) {
        return source->to_string();
      }
    }
  }
  return probe.host_name;
}

}  // namespace

struct EtcdRendezvous::Decision {
  std::optional<etcd_rdzv::ClosedRecord> closed;
  std::optional<etcd_rdzv::StateRecord> state;
  std::int64_t ready_round = -1;
  int registered = 0;  // membership keys
  bool registered_here = false;
  std::string coordinator;
};

etcd::ClientOptions etcdClientOptions(const LaunchConfig& config) {
  const RdzvConf& conf = config.rdzv_conf;
  etcd::ClientOptions options;
  options.members = etcd::parseMembers("--rdzv-endpoint", config.rdzv_endpoint);
  // protocol and the TLS files were checked with the flags (rdzv_conf.cpp).
  options.tls = confValue(conf, {"protocol"}) == "https";
  options.ca_file = confValue(conf, {"cacert", "ca_cert"});
  options.cert_file = confValue(conf, {"cert", "ssl_cert"});
  options.key_file = confValue(conf, {"key", "ssl_cert_key"});
  if (conf.read_timeout) {
    options.request_timeout = *conf.read_timeout;
  }
  return options;
}

EtcdRendezvous::EtcdRendezvous(const LaunchConfig& config, const NodeInfo& node)
    : config_(config),
      agent_id_(node.hostname + ":" + std::to_string(::getpid())),
      host_(node.hostname),
      local_world_size_(node.nproc),
      client_(etcdClientOptions(config)) {
  const auto prefix = confValue(config.rdzv_conf, {"etcd_prefix"});
  keys_ =
      std::make_unique<etcd_rdzv::Keys>(prefix.empty() ? kDefaultPrefix : prefix, config.rdzv_id);
  rdzv::ServerOptions store_options;  // every interface: other nodes' workers connect
  store_options.port = 0;
  worker_store_ = std::make_unique<rdzv::Server>(store_options);
  store_host_ = storeHost(config, client_.options());
}

EtcdRendezvous::~EtcdRendezvous() { leave(); }

std::string EtcdRendezvous::describe() const {
  return "etcd rendezvous '" + config_.rdzv_id + "' at " + client_.describe();
}

void EtcdRendezvous::registerMember(std::int64_t lease) {
  lease_id_ = lease;
  etcd_rdzv::MemberRecord record;
  record.id = agent_id_;
  record.local_world_size = local_world_size_;
  record.rank_hint = config_.node_rank;
  record.last_round = returned_;
  record.store_host = store_host_;
  record.store_port = worker_store_->port();
  record.lease_ttl_s = etcd_rdzv::declaredLeaseTtl(leaseTtl(config_.rdzv_conf));
  client_.put(keys_->member(agent_id_), etcd_rdzv::encode(record), lease);
}

// Takes the lease, registers, and starts watching and campaigning. etcd may
// not serve yet (a cluster coming up): tried again until join_timeout.
bool EtcdRendezvous::join() {
  const auto deadline = Clock::now() + config_.rdzv_conf.joinTimeout();
  const auto interval = config_.rdzv_conf.keepAliveInterval();
  bool said = false;
  // The view starts first: its watch and first read take about as long as
  // the lease and the membership key, and the round is seen through it.
  auto view =
      std::make_unique<EtcdView>(client_, keys_->base, interval, [this] { onViewChange(); });
  while (!lease_) {
    if (cancelled_) {
      return false;
    }
    try {
      auto lease = std::make_unique<etcd_rdzv::EtcdLease>(
          client_, leaseTtl(config_.rdzv_conf), interval,
          [this](std::int64_t fresh) { registerMember(fresh); }, [this] { return stateLease(); });
      registerMember(lease->id());
      lease_ = std::move(lease);
    } catch (const etcd::EtcdUnavailable& error) {
      if (Clock::now() >= deadline) {
        throw TimeoutError(std::string(error.what()) + "; gave up after join_timeout (" +
                           describeSeconds(config_.rdzv_conf.joinTimeout()) + ")");
      }
      if (!said) {
        log().warn("waiting for etcd: {}", error.what());
        said = true;
      }
      std::unique_lock lock(wait_mutex_);
      wait_.wait_until(lock, std::min(deadline, Clock::now() + interval),
                       [this] { return cancelled_.load(); });
    }
  }
  // Served, empty, from the start: the first round's workers need no word
  // from node 0 before they connect (no worker has written anything yet).
  worker_store_->start();
  view = viewFromServingMember(std::move(view), interval);
  {
    std::lock_guard lock(wait_mutex_);
    view_ = std::move(view);
    view_ready_ = true;
  }
  if (decide().closed) {
    throw Error(describe() +
                " is closed: a job with this run id has just ended; use another "
                "--rdzv-id, or start again in a few seconds");
  }
  rdzv::ElasticSettings settings;
  settings.min_nodes = config_.min_nodes;
  settings.max_nodes = config_.max_nodes;
  settings.last_call_timeout = config_.rdzv_conf.lastCallTimeout();
  settings.quarantine_after = config_.rdzv_conf.quarantineAfter();
  settings.quarantine_duration = config_.rdzv_conf.quarantineDuration();
  coordinator_ = std::make_unique<etcd_rdzv::EtcdCoordinator>(
      client_, *view_, *keys_, agent_id_, settings, [this] { return lease_->id(); },
      leaseTtl(config_.rdzv_conf), interval);
  lease_watch_ = std::make_unique<etcd_rdzv::EtcdLeaseWatch>(client_, *view_, *keys_, agent_id_);
  log().info("joined the {} as {}", describe(), agent_id_);
  return true;
}

// The view join() started before its lease, if it loaded and watches the
// member the lease and the membership key were just written through; else
// (it started while etcd was out of reach, or on a member the client has
// since left, which may be cut off from its quorum and whose watch would
// then be silent) a new one, on that member.
std::unique_ptr<EtcdView> EtcdRendezvous::viewFromServingMember(std::unique_ptr<EtcdView> early,
                                                                std::chrono::milliseconds retry) {
  try {
    early->waitLoaded();
    if (early->watchedMember() == client_.currentMember()) {
      return early;
    }
  } catch (const etcd::EtcdUnavailable&) {
  }
  early.reset();
  auto view = std::make_unique<EtcdView>(client_, keys_->base, retry, [this] { onViewChange(); });
  view->waitLoaded();
  return view;
}

// The run's lease the state key lives on (0: no state yet), for this agent's
// lease thread to renew with its own.
std::int64_t EtcdRendezvous::stateLease() {
  std::lock_guard lock(wait_mutex_);
  if (!view_) {
    return 0;
  }
  return view_->read([this](const EtcdView::Snapshot& snapshot) -> std::int64_t {
    const auto it = snapshot.find(keys_->state());
    return it == snapshot.end() ? 0 : it->second.lease;
  });
}

EtcdRendezvous::Decision EtcdRendezvous::decide() {
  return view_->read([this](const EtcdView::Snapshot& snapshot) {
    Decision decision;
    const auto value = [&](const std::string& key) -> const std::string* {
      const auto it = snapshot.find(key);
      return it == snapshot.end() ? nullptr : &it->second.value;
    };
    if (const std::string* closed = value(keys_->closed())) {
      decision.closed = etcd_rdzv::decodeClosed(*closed).value_or(etcd_rdzv::ClosedRecord{});
    }
    if (const std::string* state = value(keys_->state())) {
      decision.state = etcd_rdzv::decodeState(*state);
    }
    if (const std::string* ready = value(keys_->ready())) {
      decision.ready_round = etcd_rdzv::decodeRound(*ready).value_or(-1);
    }
    if (const std::string* coordinator = value(keys_->coordinator())) {
      decision.coordinator = *coordinator;
    }
    for (auto it = snapshot.lower_bound(keys_->members());
         it != snapshot.end() && it->first.starts_with(keys_->members()); ++it) {
      ++decision.registered;
      decision.registered_here |= it->first == keys_->member(agent_id_);
    }
    return decision;
  });
}

std::unique_ptr<PeerChannel> EtcdRendezvous::openPeerChannel(const WorkerGroup& group) {
  if (group.group_world_size <= 1) {
    return nullptr;
  }
  return std::make_unique<StorePeerChannel>(group);
}

std::optional<WorkerGroup> EtcdRendezvous::nextGroup() {
  if (!joined_) {
    if (!join()) {
      return std::nullopt;
    }
    joined_ = true;
  }
  WaitNotice notice([this] { return waitingFor(); },
                    Clock::now() + config_.rdzv_conf.joinTimeout());
  for (;;) {
    if (cancelled_) {
      return std::nullopt;
    }
    const std::int64_t seen = view_->revision();
    const Decision decision = decide();
    if (decision.closed) {
      return std::nullopt;
    }
    const auto& state = decision.state;
    const bool news = state && !state->suspended && state->round > returned_;
    const etcd_rdzv::NodeRecord* me = news ? state->find(agent_id_) : nullptr;
    if (me != nullptr && me->group_rank == 0 && !state->first) {
      serveStoreAsNodeZero(state->round);
    }
    if (me != nullptr &&
        (me->group_rank == 0 || state->first || decision.ready_round >= state->round)) {
      const etcd_rdzv::NodeRecord& zero = state->nodes.front();
      returned_ = state->round;
      was_member_ = true;
      left_out_ = false;
      return WorkerGroup{static_cast<int>(state->round),
                         me->group_rank,
                         static_cast<int>(state->nodes.size()),
                         me->base_rank,
                         state->world_size,
                         zero.store_host,
                         zero.store_port};
    }
    // A spare waits as long as the round is full, or its host is quarantined.
    const bool spare =
        news && me == nullptr &&
        (static_cast<int>(state->nodes.size()) >= config_.max_nodes || quarantinedBy(*state));
    if (notice.expired() && !spare) {
      throw TimeoutError("no round of the " + describe() + " took this node within join_timeout (" +
                         describeSeconds(config_.rdzv_conf.joinTimeout()) + "): " + waitingFor());
    }
    notice.tick();
    view_->waitForChange(seen, Clock::now() + notice.next());
  }
}

// Node 0 empties its workers' store for the round, serves it from the first
// round on, and only then tells the others (the ready key).
void EtcdRendezvous::serveStoreAsNodeZero(std::int64_t round) {
  if (store_round_ == round) {
    return;
  }
  worker_store_->clearKeySpace();
  worker_store_->start();  // serving from the first time on; then a no-op
  try {
    client_.put(keys_->ready(), etcd_rdzv::encodeRound(round), lease_->id());
    store_round_ = round;
  } catch (const Error& error) {
    log().warn("could not tell etcd this node's workers' store is ready ({}); trying again",
               error.what());
  }
}

std::string EtcdRendezvous::waitingFor() {
  const Decision decision = decide();
  const auto& state = decision.state;
  if (state && !state->suspended && state->round > returned_) {
    if (state->find(agent_id_) == nullptr && state->quarantineOf(host_) != nullptr) {
      return describeQuarantine();
    }
    if (state->find(agent_id_) == nullptr) {
      return "a place in round " + std::to_string(state->round) +
             " (it is full: this node is a spare)";
    }
    return "node 0 (" + state->nodes.front().id + ") to ready the workers' store of round " +
           std::to_string(state->round);
  }
  std::string text = std::to_string(decision.registered) + " node(s) registered, " +
                     std::to_string(config_.min_nodes) + " to " +
                     std::to_string(config_.max_nodes) + " wanted";
  if (state && state->suspended) {
    text += "; round " + std::to_string(state->round) + " is suspended below min_nodes";
  }
  if (decision.coordinator.empty()) {
    text += "; no coordinator elected yet";
  }
  return "the " + describe() + " to form a round: " + text;
}

void EtcdRendezvous::cancelWait() {
  cancelled_ = true;
  std::lock_guard lock(wait_mutex_);
  wait_.notify_all();
  if (view_) {
    view_->wake();
  }
}

void EtcdRendezvous::watchGroup(std::function<void(int newer_attempt)> over) {
  std::lock_guard lock(notify_mutex_);
  over_ = std::move(over);
}

// On the watch thread: a newer round (or a suspension) ends the running one;
// a failed close ends it for good. A successful close is no change: the
// running workers finish.
void EtcdRendezvous::onViewChange() {
  std::lock_guard lock(notify_mutex_);
  const std::int64_t running = returned_;
  if (!over_ || running < 0 || !view_ready_) {
    return;
  }
  const Decision decision = decide();
  if (decision.closed && decision.closed->failed) {
    if (over_told_ != INT64_MAX) {
      over_told_ = INT64_MAX;
      over_(INT_MAX);
    }
    return;
  }
  if (decision.state && decision.state->round > running && decision.state->round > over_told_) {
    over_told_ = decision.state->round;
    over_(static_cast<int>(decision.state->round));
  }
}

void EtcdRendezvous::requestRestart(const WorkerFailure& cause) {
  (void)cause;  // etcd's records keep no failures (ddprun status reads c10d only)
  const std::int64_t round = returned_;
  std::lock_guard lock(requests_mutex_);
  requests_.emplace_back([this, round] {
    try {
      client_.put(keys_->restart(agent_id_), etcd_rdzv::encodeRound(round), lease_->id());
    } catch (const Error& error) {
      log().error("could not ask etcd for a restart of round {}: {}", round, error.what());
    }
  });
}

// A one-second deadline per member: the agent is exiting, and an etcd that
// does not answer will end the lease at its TTL anyway.
void EtcdRendezvous::abandon() {
  const std::int64_t lease = lease_id_;
  if (lease == 0) {
    return;
  }
  etcd::ClientOptions options = client_.options();
  options.request_timeout = std::min(options.request_timeout, std::chrono::milliseconds(1000));
  try {
    etcd::Client(options).revokeLease(lease);
    log().info("revoked this node's etcd lease: the others re-form without it now");
  } catch (const Error& error) {
    log().warn("could not revoke this node's etcd lease ({}); it ends within its TTL",
               error.what());
  }
}

// A lost peer's workers die first and reset this node's; its lease is
// revoked once etcd says it went unrenewed for the TTL (by the agent that
// watches it, etcd_lease_verdict.hpp): until then the round may yet move.
bool EtcdRendezvous::failureStands(int attempt, bool restart_asked) {
  if (restart_asked) {
    return true;  // the round moves for the request: a loss waits for the TTL, too long to wait
  }
  const auto deadline = Clock::now() + lease_->ttl() + std::chrono::seconds(1);
  while (!cancelled_ && Clock::now() < deadline) {
    const std::int64_t seen = view_->revision();
    const Decision decision = decide();
    if (decision.state && decision.state->round > attempt) {
      return false;
    }
    if (decision.closed) {
      return true;
    }
    view_->waitForChange(seen, deadline);
  }
  return true;
}

// The job was closed (or failed) elsewhere before this node's workers ended.
int EtcdRendezvous::endedElsewhere(const RunResult& result) {
  const int failed = result.exit_code != 0 ? result.exit_code : 1;
  const auto closed = decide().closed;
  if (closed && closed->failed) {
    log().error("the job failed on {}; this node stops too", closed->by);
    return failed;
  }
  if (left_out_) {
    return endedQuarantined();  // its workers failed here and never ran again
  }
  if (was_member_) {
    log().error("the job was closed by another agent before this node's workers finished");
    return failed;
  }
  log().info("the job is over; this spare was not needed");
  return result.exit_code;
}

}  // namespace ddprun::launcher

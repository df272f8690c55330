#include "ddprun/launcher/c10d_rendezvous.hpp"

#include <netdb.h>
#include <unistd.h>

#include <climits>

#include "ddprun/proto/errors.hpp"
#include "ddprun/rendezvous/server.hpp"
#include "log.hpp"

namespace ddprun::launcher {
namespace {

// The endpoint's first IP address, for binding the daemon to it.
std::string resolveHost(const std::string& host) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* results = nullptr;
  if (getaddrinfo(host.c_str(), nullptr, &hints, &results) != 0 || results == nullptr) {
    throw ConfigError("--rdzv-endpoint host '" + host + "' does not resolve");
  }
  char text[NI_MAXHOST] = {};
  getnameinfo(results->ai_addr, results->ai_addrlen, text, sizeof(text), nullptr, 0,
              NI_NUMERICHOST);
  freeaddrinfo(results);
  return text;
}

ElasticOptions membershipOptions(const LaunchConfig& config, const NodeInfo& node,
                                 std::uint16_t store_port) {
  const Endpoint& endpoint = *config.rdzv_address;
  const RdzvConf& conf = config.rdzv_conf;
  ElasticOptions options;
  options.host = endpoint.host;
  options.port = static_cast<std::uint16_t>(endpoint.port);
  options.run_id = config.rdzv_id;
  options.agent_id = node.hostname + ":" + std::to_string(::getpid());
  options.local_world_size = node.nproc;
  options.node_rank_hint = config.node_rank;  // ties (all 0) keep arrival order
  options.min_nodes = config.min_nodes;
  options.max_nodes = config.max_nodes;
  options.join_timeout = conf.joinTimeout();
  options.last_call_timeout = conf.lastCallTimeout();
  options.keep_alive_interval = conf.keepAliveInterval();
  options.keep_alive_max_attempt = conf.keepAliveMaxAttempt();
  options.local_addr = config.local_addr.value_or("");
  options.store_port = store_port;
  return options;
}

}  // namespace

C10dRendezvous::C10dRendezvous(const LaunchConfig& config, const NodeInfo& node)
    : endpoint_(config.rdzv_endpoint) {
  hostRendezvousIfHere(config);
  // Bound now, so its port can be announced; served (a thread started) only
  // once this node is node 0 of a round.
  rdzv::ServerOptions store_options;  // every interface: other nodes' workers connect
  store_options.port = 0;
  worker_store_ = std::make_unique<rdzv::Server>(store_options);
  membership_ =
      std::make_unique<ElasticMembership>(membershipOptions(config, node, worker_store_->port()));
}

C10dRendezvous::~C10dRendezvous() {
  membership_.reset();  // leave while the daemon this agent may host still runs
}

void C10dRendezvous::hostRendezvousIfHere(const LaunchConfig& config) {
  const std::optional<bool> is_host = config.rdzv_conf.is_host;
  if (is_host == false) {
    return;
  }
  rdzv::ServerOptions options;
  options.host = resolveHost(config.rdzv_address->host);
  options.port = static_cast<std::uint16_t>(config.rdzv_address->port);
  try {
    daemon_ = std::make_unique<rdzv::Server>(options);
    daemon_->start();
    log().info("hosting the rendezvous at {}", config.rdzv_endpoint);
  } catch (const Error&) {
    daemon_.reset();
    if (is_host == true) {
      throw;
    }
  }
}

std::string C10dRendezvous::describe() const {
  return "c10d rendezvous at " + membership_->endpoint() +
         (daemon_ ? " (hosted by this agent)" : "");
}

std::optional<WorkerGroup> C10dRendezvous::nextGroup() {
  if (!joined_) {
    if (!membership_->join()) {
      return std::nullopt;
    }
    joined_ = true;
    log().info("joined rendezvous at {}", membership_->endpoint());
  }
  const auto round = membership_->nextRound();
  if (!round) {
    return std::nullopt;
  }
  if (round->group_rank == 0 && store_round_ != round->round) {
    worker_store_->start();          // at once the first time; then a no-op
    worker_store_->clearKeySpace();  // each round's workers start on an empty store
    store_round_ = round->round;
  }
  WorkerGroup group;
  group.attempt = static_cast<int>(round->round);
  group.group_rank = round->group_rank;
  group.group_world_size = round->group_world_size;
  group.base_rank = round->base_rank;
  group.world_size = round->world_size;
  group.store_host = round->store_host;
  group.store_port = round->store_port;
  return group;
}

void C10dRendezvous::watchGroup(std::function<void(int newer_attempt)> over) {
  if (!over) {
    membership_->onChange({});
    return;
  }
  membership_->onChange([over = std::move(over)](std::int64_t newer_round) {
    over(newer_round == ElasticMembership::kAborted ? INT_MAX : static_cast<int>(newer_round));
  });
}

int C10dRendezvous::finishJob(const RunResult& result) {
  if (result.closed_elsewhere) {
    return endedElsewhere(result);
  }
  if (result.signal != 0 || !joined_) {
    return result.exit_code;  // an agent stopped by a signal leaves the run open
  }
  using Finish = ElasticMembership::Finish;
  try {
    if (result.exit_code != 0) {
      membership_->close(/*failed=*/true);
      return result.exit_code;
    }
    switch (membership_->finish(std::chrono::seconds(300))) {
      case Finish::kAllDone:
        membership_->close(/*failed=*/false);
        break;
      case Finish::kRoundMoved:
        log().warn("the job moved to a new round after this node's workers finished; leaving it");
        break;
      case Finish::kClosed:
        break;
      case Finish::kTimedOut:
        log().warn("exit barrier: not every node finished within 300 s");
        membership_->close(/*failed=*/false);
        break;
    }
  } catch (const std::exception& error) {
    log().warn("rendezvous at the end of the job: {}", error.what());
  }
  return result.exit_code;
}

// The rendezvous ended the job before this node's workers did.
int C10dRendezvous::endedElsewhere(const RunResult& result) {
  const int failed = result.exit_code != 0 ? result.exit_code : 1;
  if (membership_->dropped()) {
    log().error(
        "the rendezvous dropped this node: no heartbeat reached it within keep_alive_interval "
        "x keep_alive_max_attempt (a network problem?); the job goes on without it");
    return failed;
  }
  if (auto failed_on = membership_->failedOn()) {
    log().error("the job failed on {} (its restarts are spent); this node stops too", *failed_on);
    return failed;
  }
  log().warn("the job was closed by another agent; stopping");
  return result.exit_code;
}

}  // namespace ddprun::launcher

#include "ddprun/launcher/rendezvous/c10d_rendezvous.hpp"

#include <netdb.h>
#include <unistd.h>

#include <climits>
#include <thread>

#include "ddprun/launcher/core/log.hpp"
#include "ddprun/launcher/rendezvous/quarantine_notice.hpp"
#include "ddprun/launcher/rendezvous/store_peer_channel.hpp"
#include "ddprun/proto/errors.hpp"
#include "ddprun/rendezvous/server.hpp"
#include "ddprun/rendezvous/token_file.hpp"
#include "endpoint_address.hpp"

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
  options.max_restarts = config.max_restarts;
  options.quarantine_after = conf.quarantineAfter();
  options.quarantine_duration = conf.quarantineDuration();
  if (conf.token_file) {
    const rdzv::Token token = rdzv::readTokenFile("--rdzv-conf token_file", *conf.token_file);
    if (token.warning) {
      log().warn("{}", *token.warning);
    }
    options.token = token.secret;
  }
  return options;
}

// A worker's failure as the rendezvous keeps it for `ddprun status`.
proto::rendezvous::WorkerFailureReport failureReport(const WorkerFailure& failure) {
  proto::rendezvous::WorkerFailureReport report;
  report.round = failure.attempt;
  report.rank = failure.rank;
  report.local_rank = failure.local_rank;
  report.pid = failure.pid;
  if (failure.status.kind == ExitStatus::Kind::Signaled) {
    report.signal = failure.status.code;
  } else {
    report.exit_code = failure.status.code;
  }
  report.reason = failure.verdict.empty() ? failure.status.describe() : failure.verdict.reason;
  return report;
}

}  // namespace

C10dRendezvous::C10dRendezvous(const LaunchConfig& config, const NodeInfo& node)
    : endpoint_(config.rdzv_endpoint),
      is_host_(config.rdzv_conf.is_host),
      host_(config.rdzv_address->host),
      port_(static_cast<std::uint16_t>(config.rdzv_address->port)) {
  // Bound now, so its port can be announced; served (a thread started) only
  // once this node is node 0 of a round.
  rdzv::ServerOptions store_options;  // every interface: other nodes' workers connect
  store_options.port = 0;
  worker_store_ = std::make_unique<rdzv::Server>(store_options);
  ElasticOptions options = membershipOptions(config, node, worker_store_->port());
  agent_id_ = options.agent_id;
  token_ = options.token;
  run_id_ = options.run_id;
  keep_alive_bound_ = options.keep_alive_interval * options.keep_alive_max_attempt;
  hostRendezvousIfHere();
  if (config.rdzv_conf.is_host != false) {
    options.try_host = [this] { hostRendezvousIfHere(); };  // on the lease thread
  }
  membership_ = std::make_unique<ElasticMembership>(std::move(options));
}

C10dRendezvous::~C10dRendezvous() {
  membership_.reset();  // leave while the daemon this agent may host still runs
}

// The agent whose address is the endpoint embeds the daemon, unless
// is_host=0; with is_host=1 it must. Binding decides "whose address": the
// bind fails on another host's address, or while a ddprund or another agent
// serves it. A name that resolves to loopback here is this machine's own
// (Debian's 127.0.1.1), bound on every address so that the others reach it
// (endpoint_address.hpp). Tried at start and again while a lost rendezvous
// is awaited.
void C10dRendezvous::hostRendezvousIfHere() {
  if (is_host_ == false || daemon_) {
    return;
  }
  rdzv::ServerOptions options;
  options.port = port_;
  options.rendezvous_host_agent = agent_id_;
  options.rendezvous_run_id = run_id_;
  options.token = token_;
  try {
    options.host = rendezvousBindAddress(host_, resolveHost(host_));
    auto daemon = std::make_unique<rdzv::Server>(options);
    daemon->start();
    daemon_ = std::move(daemon);
    hosted_ = daemon_.get();
    log().info("hosting the rendezvous at {}", endpoint_);
  } catch (const ConfigError&) {
    if (!membership_) {
      throw;  // at start: an endpoint that does not resolve is a bad flag
    }
  } catch (const Error&) {
    if (is_host_ == true && !membership_) {
      throw;  // is_host=1 at start: this agent must host it
    }
  }
}

// The daemon may start hosting later, on the lease thread: read through
// hosted_, never daemon_, from the metrics' thread. Once set, it stays until
// this object goes, after the metrics endpoint has stopped.
void C10dRendezvous::collectMetrics(metrics::Exposition& out) const {
  if (const rdzv::Server* daemon = hosted_.load()) {
    daemon->collectMetrics(out);
  }
}

std::string C10dRendezvous::describe() const {
  return "c10d rendezvous at " + membership_->endpoint() +
         (daemon_ ? " (hosted by this agent)" : "");
}

std::unique_ptr<PeerChannel> C10dRendezvous::openPeerChannel(const WorkerGroup& group) {
  if (group.group_world_size <= 1) {
    return nullptr;
  }
  return std::make_unique<StorePeerChannel>(group);
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
  if (round->group_rank == 0) {
    if (store_round_ != round->round) {
      worker_store_->clearKeySpace();  // each round's workers start on an empty store
      worker_store_->start();          // serving from the first time on; then a no-op
      store_round_ = round->round;
    }
    membership_->storeReady();  // only now are the other members told the round
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

void C10dRendezvous::watchQuarantine(std::function<void(const QuarantineNotice&)> told) {
  membership_->watchQuarantine(std::move(told));
}

void C10dRendezvous::requestRestart(const WorkerFailure& cause) {
  membership_->requestRestart(failureReport(cause));
}

// A round another agent hosted ends with that agent: its workers die with
// it and reset this node's, often before this agent has noticed the loss.
bool C10dRendezvous::failureStands(int attempt, bool restart_asked) {
  (void)attempt;  // the membership knows the round it handed out last
  return membership_->roundStands(restart_asked);
}

int C10dRendezvous::finishJob(const RunResult& result) {
  if (!result.closed_elsewhere && (result.signal != 0 || !joined_ || result.left_unfit)) {
    return result.exit_code;  // an agent stopped by a signal, or unfit, leaves the run open
  }
  const JobEnd end = result.closed_elsewhere
                         ? JobEnd{endedElsewhere(result), !membership_->dropped()}
                         : closeJob(result);
  if (end.run_closed) {
    lingerWhileOthersConnected();
  }
  return end.exit_code;
}

// This node's end of the job: the run closed as failed after its workers
// failed, or the exit barrier after they succeeded.
C10dRendezvous::JobEnd C10dRendezvous::closeJob(const RunResult& result) {
  using Finish = ElasticMembership::Finish;
  try {
    if (result.exit_code != 0) {
      // This node's workers failed for good (or could not be spawned): the
      // job fails everywhere. An error of this agent's own rendezvous (it
      // never ran a group) only takes this agent out.
      const bool aborted =
          result.started &&
          membership_->close(/*failed=*/true,
                             result.failures.empty()
                                 ? std::nullopt
                                 : std::optional(failureReport(result.failures.front())));
      return {result.exit_code, aborted};
    }
    switch (membership_->finish(std::chrono::seconds(300))) {
      case Finish::kAllDone:
        return {0, membership_->close(/*failed=*/false)};
      case Finish::kRoundMoved:
        log().error(
            "the job moved to a new round after this node's workers succeeded (a node was lost "
            "or joined); this node leaves it and cannot report the job a success");
        return {1, false};
      case Finish::kDropped:
        log().error(
            "the rendezvous dropped this node while it waited for the others (no heartbeat "
            "reached it within keep_alive_interval x keep_alive_max_attempt); this node's "
            "workers succeeded, but it cannot report the job a success");
        return {1, false};
      case Finish::kClosed:
        log().error("the job was closed before every node reported success");
        return {1, true};
      case Finish::kLost:
        log().error("{}; this node's workers succeeded, but not every node's is known to have",
                    membership_->error());
        return {1, false};
      case Finish::kTimedOut:
        log().error("exit barrier: not every node finished within 300 s; closing the job");
        return {1, membership_->close(/*failed=*/false)};
    }
  } catch (const std::exception& error) {
    log().error("rendezvous at the end of the job: {}", error.what());
  }
  return {1, false};
}

// The agent that hosts the rendezvous leaves last once the run is closed,
// whoever closed it: the others may not have read their "finished", or that
// the job failed, and would take a host gone before that for lost (and wait
// join_timeout for it to come back). Bounded by the keep-alive bound (they
// leave when their agents exit).
void C10dRendezvous::lingerWhileOthersConnected() {
  const rdzv::Server* hosted = hosted_.load();
  if (hosted == nullptr) {
    return;
  }
  const auto deadline = std::chrono::steady_clock::now() + keep_alive_bound_;
  while (hosted->agentsConnected(run_id_, agent_id_) > 0 &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // a short wait at exit
  }
}

// The rendezvous ended the job before this node's workers did.
int C10dRendezvous::endedElsewhere(const RunResult& result) {
  const int failed = result.exit_code != 0 ? result.exit_code : 1;
  if (membership_->dropped()) {
    log().error(
        "the rendezvous dropped this node: no heartbeat reached it within keep_alive_interval "
        "x keep_alive_max_attempt (a network problem?), and the job ended without it");
    return failed;
  }
  if (auto failed_on = membership_->failedOn()) {
    log().error("the job failed on {}; this node stops too", *failed_on);
    return failed;
  }
  if (membership_->leftOutByQuarantine()) {
    // Its workers failed here and never ran again, so it cannot report the
    // job's success as its own; nor did the job fail.
    return endedQuarantined();
  }
  if (membership_->wasMember()) {
    log().error("the job was closed by another agent before this node's workers finished");
    return failed;
  }
  log().info("the job is over; this spare was not needed");
  return result.exit_code;
}

}  // namespace ddprun::launcher

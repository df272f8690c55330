#include "ddprun/launcher/rendezvous/static_rendezvous.hpp"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <sstream>
#include <utility>

#include "ddprun/launcher/core/environment.hpp"
#include "ddprun/launcher/core/log.hpp"
#include "ddprun/launcher/core/option_values.hpp"
#include "ddprun/launcher/rendezvous/store_peer_channel.hpp"
#include "ddprun/launcher/rendezvous/wait_notice.hpp"
#include "ddprun/proto/errors.hpp"
#include "ddprun/proto/rendezvous_protocol.hpp"
#include "ddprun/rendezvous/client.hpp"
#include "ddprun/rendezvous/server.hpp"
#include "store_connection.hpp"
#include "store_watch.hpp"

namespace ddprun::launcher {
namespace {

using Clock = std::chrono::steady_clock;
using Duration = StaticRendezvous::Duration;
namespace protocol = proto::rendezvous;

std::string within(Duration timeout) { return " within " + describeSeconds(timeout); }

void validate(const StaticRendezvousOptions& options) {
  if (options.nnodes < 1) {
    throw ConfigError("static rendezvous needs --nnodes >= 1, got " +
                      std::to_string(options.nnodes));
  }
  if (options.node_rank < 0 || options.node_rank >= options.nnodes) {
    throw ConfigError("--node-rank " + std::to_string(options.node_rank) + " is not in [0, " +
                      std::to_string(options.nnodes) + ") for --nnodes " +
                      std::to_string(options.nnodes));
  }
  if (options.nproc_per_node < 1) {
    throw ConfigError("static rendezvous needs --nproc-per-node >= 1, got " +
                      std::to_string(options.nproc_per_node));
  }
  // Only node 0 can learn an ephemeral port; the others must be told it.
  if (options.port == 0 && options.node_rank != 0) {
    throw ConfigError("static rendezvous on --node-rank " + std::to_string(options.node_rank) +
                      " needs the store's port; try to specify --master-port");
  }
}

struct NodeKey {
  int nproc = 0;
  std::string host;
  int next_attempt = 0;
};

// A node key's value is "<nproc> <hostname> <next attempt>".
NodeKey parseNode(const std::string& value) {
  NodeKey info;
  std::istringstream in(value);
  in >> info.nproc >> info.host >> info.next_attempt;
  return info;
}

}  // namespace

StaticRendezvous::StaticRendezvous(StaticRendezvousOptions options)
    : options_(std::move(options)), port_(options_.port) {
  validate(options_);
  if (options_.hostname.empty()) {
    options_.hostname = thisHostName();
  }
  if (options_.node_rank == 0) {
    // Every address, so agents and workers on other nodes can reach it.
    rdzv::ServerOptions server_options;
    server_options.host = "";
    server_options.port = options_.port;
    server_options.threads = options_.server_threads;
    server_ = std::make_unique<rdzv::Server>(server_options);
    server_->start();
    port_ = server_->port();
    clock_watch_.measured({std::chrono::nanoseconds(0), std::chrono::nanoseconds(0),
                           "static rendezvous store at " + storeAddress()});
  }
}

StaticRendezvous::~StaticRendezvous() {
  watch_.reset();   // its callback uses the members below
  client_.reset();  // close our connection before the server goes
  if (server_) {
    server_->stop();
  }
}

std::string StaticRendezvous::describe() const {
  return "static rendezvous at " + storeAddress() + ": node rank " +
         std::to_string(options_.node_rank) + " of " + std::to_string(options_.nnodes) +
         (server_ ? " (this node hosts the store)" : "");
}

std::unique_ptr<PeerChannel> StaticRendezvous::openPeerChannel(const WorkerGroup& group) {
  if (group.group_world_size <= 1) {
    return nullptr;
  }
  return std::make_unique<StorePeerChannel>(group);
}

std::optional<WorkerGroup> StaticRendezvous::nextGroup() {
  std::optional<Clock::time_point> lost_since;
  for (;;) {
    try {
      if (!group_ || lost_) {
        // The first join, or again once node 0 (the store) is back.
        watch_.reset();
        const int next_attempt = group_ ? group_->attempt + 1 : 0;
        lost_ = false;
        group_ = join(next_attempt);
        watchStore();
      } else {
        beforeAttempt(group_->attempt + 1);
        ++group_->attempt;
      }
      break;
    } catch (const NetworkError& error) {
      if (cancelled_) {
        return std::nullopt;  // cancelWait() shut the connection down
      }
      if (server_ || (lost_since && Clock::now() - *lost_since > options_.join_timeout)) {
        throw;  // node 0's own store, or node 0 keeps failing
      }
      // Node 0 went away while this node waited on its store: join again
      // once it is back (join() waits for it up to the join timeout).
      if (!lost_.exchange(true)) {
        log().error(
            "lost node rank 0, which hosts the store at {} ({}); waiting up to {} for it "
            "to be back",
            storeAddress(), error.what(), describeSeconds(options_.join_timeout));
      }
      lost_since = lost_since.value_or(Clock::now());
    }
  }
  if (cancelled_) {
    return std::nullopt;
  }
  return group_;
}

void StaticRendezvous::watchGroup(std::function<void(int)> over) {
  std::lock_guard lock(over_mutex_);
  over_ = std::move(over);
}

void StaticRendezvous::watchClock(std::function<void(const ClockOffset&)> measured) {
  clock_watch_.watch(std::move(measured));
}

// Every node but node 0 depends on node 0's agent, which hosts the store:
// losing it ends the running group at once (its workers would hang in their
// next collective), and the next group waits for node 0 to be back.
void StaticRendezvous::watchStore() {
  if (server_) {
    return;
  }
  const int attempt = group_->attempt;
  watch_ = std::make_unique<StoreWatch>(
      options_.host, port_, key("watch"), std::chrono::seconds(2), options_.keep_alive_bound,
      [this, attempt](const std::string& why) {
        lost_ = true;
        log().error(
            "lost node rank 0, which hosts the store at {} ({}): stopping this node's workers and "
            "waiting up to {} for node rank 0 to be back",
            storeAddress(), why, describeSeconds(options_.join_timeout));
        std::lock_guard lock(over_mutex_);
        if (over_) {
          over_(attempt + 1);
        }
      },
      [this](rdzv::StoreClient& client) {
        if (auto offset = measureClockOffset(client, kClockSamples,
                                             "static rendezvous store at " + storeAddress())) {
          clock_watch_.measured(*offset);
        }
      });
}

// Node 0's agent dies with its workers, whose connections reset this node's
// workers, often before the watch has noticed. A PING on this node's own
// connection to node 0's store settles it: answered within the keep-alive
// bound, node 0 stands (unless the watch saw it go meanwhile).
bool StaticRendezvous::failureStands(int attempt, bool restart_asked) {
  (void)attempt;
  if (restart_asked) {
    return true;  // a static job restarts whole, a node lost or not
  }
  if (server_ || lost_) {
    return !lost_;
  }
  try {
    client_->setTimeout(options_.keep_alive_bound);
    client_->ping();
    client_->setTimeout(options_.join_timeout);
  } catch (const Error&) {
    return cancelled_;  // cancelWait() interrupted it: nothing more is known
  }
  return !lost_;
}

void StaticRendezvous::cancelWait() {
  cancelled_ = true;
  std::lock_guard lock(client_mutex_);
  if (client_) {
    client_->interrupt();
  }
}

int StaticRendezvous::finishJob(const RunResult& result) {
  watch_.reset();  // node 0 may go first now
  if (!group_ || cancelled_) {
    return result.exit_code;  // never formed a group, or stopped while waiting
  }
  if (result.signal != 0 || result.left_unfit) {
    log().info("stopped by a signal or unfit: not waiting for the other nodes to finish");
    return result.exit_code;
  }
  try {
    exitBarrier(options_.exit_barrier_timeout);
  } catch (const Error& error) {
    log().warn("exit barrier: {}", error.what());
  }
  return result.exit_code;
}

std::string StaticRendezvous::key(const std::string& suffix) const {
  return protocol::key(protocol::Scope::kStatic, options_.run_id, suffix);
}

std::string StaticRendezvous::storeAddress() const { return formatEndpoint(options_.host, port_); }

std::vector<std::string> StaticRendezvous::perNodeKeys(const std::string& name, int first) const {
  std::vector<std::string> keys;
  for (int rank = first; rank < options_.nnodes; ++rank) {
    keys.push_back(key(name + "/" + std::to_string(rank)));
  }
  return keys;
}

WorkerGroup StaticRendezvous::join(int next_attempt) {
  const auto deadline = Clock::now() + options_.join_timeout;
  connect(deadline);
  if (cancelled_) {
    throw NetworkError("the static rendezvous was cancelled");
  }
  claimNodeRank();
  if (options_.node_rank != 0) {
    refuseIfUnlikeNodeZero(deadline);
  }
  client_->set(key("node/" + std::to_string(options_.node_rank)),
               std::to_string(options_.nproc_per_node) + " " + options_.hostname + " " +
                   std::to_string(next_attempt));
  waitForNodes("node", 0, deadline, options_.join_timeout, "to join the store at " + storeAddress(),
               "join");
  const auto nodes = client_->multiGet(perNodeKeys("node", 0));
  checkNodes(nodes);
  // Every node proposes the attempt after its last: a node 0 that was
  // restarted proposes 0, the others go on counting.
  int attempt = 0;
  for (const std::string& value : nodes) {
    attempt = std::max(attempt, parseNode(value).next_attempt);
  }
  return firstGroup(attempt);
}

void StaticRendezvous::connect(TimePoint deadline) {
  // Node 0 may start after the others: keep trying, and say so.
  WaitNotice notice(
      [this] {
        return "the static rendezvous store at " + storeAddress() + " (node rank 0 hosts it)";
      },
      deadline);
  std::unique_ptr<rdzv::StoreClient> client;
  try {
    client = connectToStore(options_.host, port_, notice, cancelled_);
  } catch (const TimeoutError& error) {
    throw TimeoutError("static rendezvous: the store at " + storeAddress() +
                       " (hosted by node rank 0) did not come up" + within(options_.join_timeout) +
                       " (run id " + options_.run_id + "): " + error.what());
  }
  if (client) {
    client->setTimeout(options_.join_timeout);
  }
  std::lock_guard lock(client_mutex_);
  client_ = std::move(client);
}

void StaticRendezvous::claimNodeRank() {
  const std::string rank = std::to_string(options_.node_rank);
  // COMPARE_SET is atomic on the store: exactly one agent per rank finds its
  // own id there (the same agent joining again, after node 0 was lost, too).
  const std::string me = options_.hostname + ":" + std::to_string(::getpid());
  if (client_->compareSet(key("claim/" + rank), "", me) == me) {
    return;
  }
  std::string message = "--node-rank " + rank + " is claimed by more than one agent (this one on " +
                        options_.hostname;
  if (client_->check({key("node/" + rank)})) {
    message += ", and one on " + parseNode(client_->get(key("node/" + rank))).host;
  }
  message +=
      "); every node needs its own --node-rank in [0, " + std::to_string(options_.nnodes) + ")";
  // The first claimant is left waiting for the rank nobody took: let its
  // timeout message say why.
  client_->set(key("error"), message);
  throw ConfigError(message);
}

// Node 0's --nproc-per-node is the job's. A node that differs is refused
// before it joins: it gives its node rank back and leaves its reason in
// "refused/<rank>", so node 0 and the nodes that agree keep waiting, say why,
// and take a corrected agent started in its place.
void StaticRendezvous::refuseIfUnlikeNodeZero(TimePoint deadline) {
  const std::string rank = std::to_string(options_.node_rank);
  WaitNotice notice([this] { return "node rank 0 to join the store at " + storeAddress(); },
                    deadline);
  try {
    waitForKeys({key("node/0")}, notice);
  } catch (const TimeoutError&) {
    throw TimeoutError(timeoutMessage("node", 0, "join", options_.join_timeout));
  }
  const NodeKey node0 = parseNode(client_->get(key("node/0")));
  if (node0.nproc == options_.nproc_per_node) {
    // An earlier, wrong agent's reason is spent. Emptied, never deleted: a
    // node reading it between its CHECK and its GET must not wait for it.
    client_->set(key("refused/" + rank), "");
    return;
  }
  const std::string message =
      "node rank " + rank + " (" + options_.hostname + ") has --nproc-per-node " +
      std::to_string(options_.nproc_per_node) + " but node rank 0 (" + node0.host + ") has " +
      std::to_string(node0.nproc) +
      ": a static job gives every node the same block of ranks; start node rank " + rank +
      " again with --nproc-per-node " + std::to_string(node0.nproc) +
      " (the other nodes wait for it), or use --rdzv-backend c10d for nodes of different sizes";
  client_->set(key("refused/" + rank), message);
  client_->deleteKey(key("claim/" + rank));
  throw ConfigError("static rendezvous refused this node: " + message);
}

void StaticRendezvous::checkNodes(const std::vector<std::string>& values) const {
  std::string mismatches;
  for (std::size_t rank = 0; rank < values.size(); ++rank) {
    const NodeKey node = parseNode(values[rank]);
    if (node.nproc != options_.nproc_per_node) {
      mismatches += (mismatches.empty() ? "" : ", ") + std::string("node rank ") +
                    std::to_string(rank) + " (" + node.host + ") has " + std::to_string(node.nproc);
    }
  }
  if (!mismatches.empty()) {
    throw ConfigError(
        "static rendezvous needs the same --nproc-per-node on every node (a static job "
        "gives every node the same block of ranks): node rank " +
        std::to_string(options_.node_rank) + " (" + options_.hostname + ") has " +
        std::to_string(options_.nproc_per_node) + " but " + mismatches);
  }
}

WorkerGroup StaticRendezvous::firstGroup(int attempt) const {
  WorkerGroup group;
  group.attempt = attempt;
  group.group_rank = options_.node_rank;
  group.group_world_size = options_.nnodes;
  group.base_rank = options_.node_rank * options_.nproc_per_node;
  group.world_size = options_.nnodes * options_.nproc_per_node;
  group.store_host = options_.host;
  group.store_port = port_;
  return group;
}

}  // namespace ddprun::launcher

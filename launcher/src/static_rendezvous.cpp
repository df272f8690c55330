#include "ddprun/launcher/static_rendezvous.hpp"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <sstream>
#include <utility>

#include "ddprun/proto/errors.hpp"
#include "ddprun/rendezvous/client.hpp"
#include "ddprun/rendezvous/server.hpp"

namespace ddprun::launcher {
namespace {

using Clock = std::chrono::steady_clock;
using Duration = StaticRendezvous::Duration;

// What is left until `deadline`, at least 1 ms so a late call still asks once.
Duration remaining(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<Duration>(deadline - Clock::now());
  return std::max(left, Duration(1));
}

std::string within(Duration timeout) {
  return " within " + std::to_string(timeout.count()) + " ms";
}

std::string localHostname() {
  std::array<char, 256> name{};
  if (::gethostname(name.data(), name.size() - 1) != 0) {
    return "localhost";
  }
  return name.data();
}

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
  if (options.master_port == 0 && options.node_rank != 0) {
    throw ConfigError("static rendezvous on --node-rank " + std::to_string(options.node_rank) +
                      " needs a --master-port; try to specify --master-port");
  }
}

struct NodeInfo {
  int nproc = 0;
  std::string host;
};

// A node key's value is "<nproc> <hostname>".
NodeInfo parseNode(const std::string& value) {
  NodeInfo info;
  std::istringstream in(value);
  in >> info.nproc >> info.host;
  return info;
}

}  // namespace

StaticRendezvous::StaticRendezvous(StaticRendezvousOptions options)
    : options_(std::move(options)), port_(options_.master_port) {
  validate(options_);
  if (options_.hostname.empty()) {
    options_.hostname = localHostname();
  }
  if (options_.node_rank == 0) {
    // Every address, so agents and workers on other nodes can reach it.
    rdzv::ServerOptions server_options;
    server_options.host = "";
    server_options.port = options_.master_port;
    server_options.threads = options_.server_threads;
    server_ = std::make_unique<rdzv::Server>(server_options);
    server_->start();
    port_ = server_->port();
  }
}

StaticRendezvous::~StaticRendezvous() {
  client_.reset();  // close our connection before the server goes
  if (server_) {
    server_->stop();
  }
}

std::string StaticRendezvous::key(const std::string& suffix) const {
  return "/ddprun/" + options_.run_id + "/static/" + suffix;
}

std::vector<std::string> StaticRendezvous::perNodeKeys(const std::string& name, int first) const {
  std::vector<std::string> keys;
  for (int rank = first; rank < options_.nnodes; ++rank) {
    keys.push_back(key(name + "/" + std::to_string(rank)));
  }
  return keys;
}

proto::WorkerEnv StaticRendezvous::join() {
  const auto deadline = Clock::now() + options_.join_timeout;
  connect(deadline);
  claimNodeRank();
  client_->set(key("node/" + std::to_string(options_.node_rank)),
               std::to_string(options_.nproc_per_node) + " " + options_.hostname);
  waitForNodes("node", 0, deadline, "join" + within(options_.join_timeout));
  checkNodes(client_->multiGet(perNodeKeys("node", 0)));
  return groupEnv();
}

void StaticRendezvous::connect(TimePoint deadline) {
  // Node 0 may start after the others: the client retries refused connects.
  client_ = std::make_unique<rdzv::StoreClient>(options_.master_addr, port_, remaining(deadline));
  client_->setTimeout(options_.join_timeout);
}

void StaticRendezvous::claimNodeRank() {
  const std::string rank = std::to_string(options_.node_rank);
  // ADD is atomic on the store: exactly one agent per rank sees 1.
  if (client_->add(key("claim/" + rank), 1) == 1) {
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

void StaticRendezvous::checkNodes(const std::vector<std::string>& values) const {
  std::string mismatches;
  for (std::size_t rank = 0; rank < values.size(); ++rank) {
    const NodeInfo node = parseNode(values[rank]);
    if (node.nproc != options_.nproc_per_node) {
      mismatches += (mismatches.empty() ? "" : ", ") + std::string("node rank ") +
                    std::to_string(rank) + " (" + node.host + ") has " + std::to_string(node.nproc);
    }
  }
  if (!mismatches.empty()) {
    throw ConfigError(
        "static rendezvous needs the same --nproc-per-node on every node (torchrun "
        "assumes homogeneous nodes): node rank " +
        std::to_string(options_.node_rank) + " (" + options_.hostname + ") has " +
        std::to_string(options_.nproc_per_node) + " but " + mismatches);
  }
}

void StaticRendezvous::waitForNodes(const std::string& name, int first, TimePoint deadline,
                                    const std::string& what) {
  try {
    client_->wait(perNodeKeys(name, first), remaining(deadline));
  } catch (const TimeoutError&) {
    throw TimeoutError(timeoutMessage(name, first, what));
  }
}

std::string StaticRendezvous::timeoutMessage(const std::string& name, int first,
                                             const std::string& what) {
  std::string missing;
  for (int rank = first; rank < options_.nnodes; ++rank) {
    if (!client_->check({key(name + "/" + std::to_string(rank))})) {
      missing += (missing.empty() ? "" : ", ") + std::to_string(rank);
    }
  }
  std::string message = "static rendezvous: node rank(s) " + missing + " of " +
                        std::to_string(options_.nnodes) + " did not " + what + " (store at " +
                        options_.master_addr + ":" + std::to_string(port_) + ", run id " +
                        options_.run_id + ")";
  if (client_->check({key("error")})) {
    message += "; " + client_->get(key("error"));
  }
  return message;
}

void StaticRendezvous::beforeAttempt(int attempt) {
  DDPRUN_ASSERT(client_ != nullptr, "beforeAttempt() before join()");
  if (attempt <= 0) {
    return;  // a fresh store: only agent keys, which workers never touch
  }
  if (options_.nnodes == 1) {
    server_->clearKeySpace();
    return;
  }
  // The clear also wipes the agent keys (one key space for everyone), which
  // is safe here: every node is inside this barrier, join's keys are spent,
  // and the keys read after the clear ("cleared", then the exit barrier's)
  // are written after it.
  const auto deadline = Clock::now() + options_.join_timeout;
  const std::string prefix = "attempt/" + std::to_string(attempt);
  client_->add(key(prefix + "/node/" + std::to_string(options_.node_rank)), 1);
  const std::string what = "reach attempt " + std::to_string(attempt) +
                           within(options_.join_timeout) +
                           " (every node must stop its workers before the store is emptied)";
  if (server_) {
    waitForNodes(prefix + "/node", 0, deadline, what);
    server_->clearKeySpace();
    client_->set(key(prefix + "/cleared"), "1");
    return;
  }
  try {
    client_->wait({key(prefix + "/cleared")}, remaining(deadline));
  } catch (const TimeoutError&) {
    throw TimeoutError(timeoutMessage(prefix + "/node", 0, what));
  }
}

void StaticRendezvous::exitBarrier(Duration timeout) {
  DDPRUN_ASSERT(client_ != nullptr, "exitBarrier() before join()");
  if (options_.nnodes == 1) {
    return;
  }
  const auto deadline = Clock::now() + timeout;
  const std::string rank = std::to_string(options_.node_rank);
  client_->add(key("done/" + rank), 1);
  waitForNodes("done", 0, deadline, "reach the exit barrier" + within(timeout));
  if (server_) {
    // Node 0 leaves last: stopping the server as soon as "done" is complete
    // could drop the wake-up of a slower node's WAIT.
    waitForNodes("left", 1, deadline, "leave the exit barrier" + within(timeout));
  } else {
    client_->add(key("left/" + rank), 1);  // answered, so counted before we go
  }
}

proto::WorkerEnv StaticRendezvous::groupEnv() const {
  proto::WorkerEnv group;
  group.group_rank = options_.node_rank;
  group.group_world_size = options_.nnodes;
  group.local_world_size = options_.nproc_per_node;
  group.world_size = options_.nnodes * options_.nproc_per_node;
  group.role_world_size = group.world_size;                 // one role, homogeneous nodes
  group.rank = group.group_rank * options_.nproc_per_node;  // local rank 0's; Agent fills the rest
  group.role_rank = group.rank;
  group.role_name = options_.role;
  group.master_addr = options_.master_addr;
  group.master_port = port_;
  group.run_id = options_.run_id;
  group.use_agent_store = true;  // workers are clients of node 0's store
  return group;
}

}  // namespace ddprun::launcher

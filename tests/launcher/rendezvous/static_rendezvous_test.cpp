// Static multi-node rendezvous with "nodes" as threads of one process on
// 127.0.0.1: group environments, node 0 starting last, a missing node, a
// duplicated node rank, a node refused for its --nproc-per-node while the
// others wait, the exit barrier keeping node 0's store up, and the
// per-attempt clear barrier.
#include "ddprun/launcher/rendezvous/static_rendezvous.hpp"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <future>
#include <memory>
#include <string>
#include <vector>

#include "ddprun/proto/errors.hpp"
#include "ddprun/rendezvous/client.hpp"

namespace ddprun::launcher {
namespace {

using namespace std::chrono_literals;
using Node = std::unique_ptr<StaticRendezvous>;

// A port that was free a moment ago: every node must know it before node 0 binds it.
std::uint16_t freePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t length = sizeof(addr);
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  EXPECT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &length), 0);
  ::close(fd);
  return ntohs(addr.sin_port);
}

Node makeNode(int node_rank, int nnodes, int nproc, std::uint16_t port,
              std::chrono::milliseconds join_timeout = 10s, std::string hostname = "") {
  StaticRendezvousOptions options;
  options.node_rank = node_rank;
  options.nnodes = nnodes;
  options.nproc_per_node = nproc;
  options.port = port;
  options.run_id = "test-run";
  options.join_timeout = join_timeout;
  options.hostname = hostname.empty() ? "host-" + std::to_string(node_rank) : hostname;
  return std::make_unique<StaticRendezvous>(options);
}

std::future<WorkerGroup> joinAsync(StaticRendezvous& node) {
  return std::async(std::launch::async, [&node] { return node.join(); });
}

template <typename F>
std::future<void> runAsync(F function) {
  return std::async(std::launch::async, std::move(function));
}

// The message of the exception the future holds; "<none>" when it holds a value.
template <typename Error, typename T>
std::string errorOf(std::future<T>& future) {
  try {
    future.get();
  } catch (const Error& error) {
    return error.what();
  }
  return "<none>";
}

bool stillRunning(const std::future<void>& future) {
  return future.wait_for(100ms) == std::future_status::timeout;
}

// Joins every node concurrently and returns their groups in node-rank order.
std::vector<WorkerGroup> joinAll(std::vector<Node>& nodes) {
  std::vector<std::future<WorkerGroup>> joins;
  for (Node& node : nodes) {
    joins.push_back(joinAsync(*node));
  }
  std::vector<WorkerGroup> groups;
  for (auto& join : joins) {
    groups.push_back(join.get());
  }
  return groups;
}

std::vector<Node> makeNodes(int nnodes, int nproc, std::uint16_t port) {
  std::vector<Node> nodes;
  for (int rank = 0; rank < nnodes; ++rank) {
    nodes.push_back(makeNode(rank, nnodes, nproc, port));
  }
  return nodes;
}

TEST(StaticRendezvousTest, TwoNodesGetTheirGroups) {
  const std::uint16_t port = freePort();
  std::vector<Node> nodes = makeNodes(2, 4, port);
  const std::vector<WorkerGroup> groups = joinAll(nodes);
  for (int rank = 0; rank < 2; ++rank) {
    const WorkerGroup& group = groups[rank];
    EXPECT_EQ(group.attempt, 0);
    EXPECT_EQ(group.group_rank, rank);
    EXPECT_EQ(group.group_world_size, 2);
    EXPECT_EQ(group.world_size, 8);
    EXPECT_EQ(group.base_rank, rank * 4);
    EXPECT_EQ(group.store_host, "127.0.0.1");
    EXPECT_EQ(group.store_port, port);
  }
  EXPECT_TRUE(nodes[0]->hostsStore());
  EXPECT_FALSE(nodes[1]->hostsStore());
}

TEST(StaticRendezvousTest, NodeZeroStartingLastStillWorks) {
  const std::uint16_t port = freePort();
  Node node1 = makeNode(1, 3, 2, port);
  Node node2 = makeNode(2, 3, 2, port);
  auto join1 = joinAsync(*node1);
  auto join2 = joinAsync(*node2);
  // Nobody listens yet: both keep retrying instead of failing.
  EXPECT_EQ(join1.wait_for(200ms), std::future_status::timeout);
  Node node0 = makeNode(0, 3, 2, port);
  auto join0 = joinAsync(*node0);
  EXPECT_EQ(join0.get().group_rank, 0);
  EXPECT_EQ(join1.get().base_rank, 2);
  const WorkerGroup group2 = join2.get();
  EXPECT_EQ(group2.base_rank, 4);
  EXPECT_EQ(group2.world_size, 6);
}

TEST(StaticRendezvousTest, MissingNodeTimesOutNamingIt) {
  const std::uint16_t port = freePort();
  Node node0 = makeNode(0, 3, 1, port, 300ms);
  Node node1 = makeNode(1, 3, 1, port, 300ms);
  const auto start = std::chrono::steady_clock::now();
  auto join0 = joinAsync(*node0);
  auto join1 = joinAsync(*node1);
  for (auto* join : {&join0, &join1}) {
    const std::string message = errorOf<TimeoutError>(*join);
    EXPECT_NE(message.find("node rank(s) 2 of 3 did not join within 0.3 s"), std::string::npos)
        << message;
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
}

TEST(StaticRendezvousTest, DuplicateNodeRankIsAClearError) {
  const std::uint16_t port = freePort();
  Node node0 = makeNode(0, 3, 1, port, 1s);
  // Two agents (on two hosts) both given --node-rank 1.
  Node first = makeNode(1, 3, 1, port, 1s, "host-a");
  Node second = makeNode(1, 3, 1, port, 1s, "host-b");
  auto join0 = joinAsync(*node0);
  auto join_first = joinAsync(*first);
  auto join_second = joinAsync(*second);
  const std::string first_error = errorOf<Error>(join_first);
  const std::string second_error = errorOf<Error>(join_second);
  // Exactly one of the two claimants is refused at once; the other waits
  // for the rank nobody took and its timeout names the duplicate.
  const std::string claimed = "--node-rank 1 is claimed by more than one agent";
  const bool first_refused = first_error.rfind(claimed, 0) == 0;
  const bool second_refused = second_error.rfind(claimed, 0) == 0;
  EXPECT_NE(first_refused, second_refused) << first_error << "\n" << second_error;
  const std::string timeout = errorOf<TimeoutError>(join0);
  EXPECT_NE(timeout.find("node rank(s) 2 of 3"), std::string::npos) << timeout;
  EXPECT_NE(timeout.find("claimed by more than one agent"), std::string::npos) << timeout;
}

// Node 0's --nproc-per-node is the job's: a node that differs is refused in
// one line, node 0 keeps waiting and its timeout says why, and an agent
// started again with the right count joins in the refused one's place.
TEST(StaticRendezvousTest, ANodeUnlikeNodeZeroIsRefusedAndTheOthersWaitForItsFix) {
  const std::uint16_t port = freePort();
  Node node0 = makeNode(0, 2, 2, port, 5s);
  auto join0 = joinAsync(*node0);
  Node wrong = makeNode(1, 2, 3, port, 5s);
  auto join_wrong = joinAsync(*wrong);
  EXPECT_EQ(errorOf<ConfigError>(join_wrong),
            "static rendezvous refused this node: node rank 1 (host-1) has --nproc-per-node 3 "
            "but node rank 0 (host-0) has 2: a static job gives every node the same block of "
            "ranks; start node rank 1 again with --nproc-per-node 2 (the other nodes wait for "
            "it), or use --rdzv-backend c10d for nodes of different sizes");
  EXPECT_EQ(join0.wait_for(300ms), std::future_status::timeout);  // still waiting

  Node fixed = makeNode(1, 2, 2, port, 5s);
  const WorkerGroup group1 = fixed->join();
  EXPECT_EQ(group1.world_size, 4);
  EXPECT_EQ(group1.base_rank, 2);
  EXPECT_EQ(join0.get().world_size, 4);
}

TEST(StaticRendezvousTest, NodeZerosTimeoutNamesTheRefusedNode) {
  const std::uint16_t port = freePort();
  Node node0 = makeNode(0, 3, 2, port, 1s);
  auto join0 = joinAsync(*node0);
  Node wrong = makeNode(2, 3, 4, port, 1s);
  EXPECT_THROW(wrong->join(), ConfigError);
  Node node1 = makeNode(1, 3, 2, port, 1s);
  auto join1 = joinAsync(*node1);
  for (auto* join : {&join0, &join1}) {
    const std::string timeout = errorOf<TimeoutError>(*join);
    EXPECT_NE(timeout.find("node rank(s) 2 of 3 did not join"), std::string::npos) << timeout;
    EXPECT_NE(timeout.find("; node rank 2 (host-2) has --nproc-per-node 4 but node rank 0 "
                           "(host-0) has 2"),
              std::string::npos)
        << timeout;
  }
}

TEST(StaticRendezvousTest, ExitBarrierKeepsTheStoreUpUntilTheLastNode) {
  const std::uint16_t port = freePort();
  std::vector<Node> nodes = makeNodes(3, 1, port);
  joinAll(nodes);
  auto done0 = runAsync([&] { nodes[0]->exitBarrier(10s); });
  auto done1 = runAsync([&] { nodes[1]->exitBarrier(10s); });
  EXPECT_TRUE(stillRunning(done0));
  EXPECT_TRUE(stillRunning(done1));
  // A late worker or agent still reaches the store while node 0 waits.
  rdzv::StoreClient late("127.0.0.1", port, 2s);
  late.ping();
  auto done2 = runAsync([&] { nodes[2]->exitBarrier(10s); });
  done2.get();
  done1.get();
  done0.get();
  nodes[0].reset();
  EXPECT_ANY_THROW(rdzv::StoreClient("127.0.0.1", port, 100ms));
}

TEST(StaticRendezvousTest, ExitBarrierTimesOutNamingTheMissingNode) {
  const std::uint16_t port = freePort();
  std::vector<Node> nodes = makeNodes(2, 1, port);
  joinAll(nodes);
  try {
    nodes[0]->exitBarrier(200ms);
    FAIL() << "no timeout";
  } catch (const TimeoutError& error) {
    EXPECT_NE(std::string(error.what())
                  .find("node rank(s) 1 of 2 did not reach the exit barrier within 0.2 s"),
              std::string::npos)
        << error.what();
  }
}

TEST(StaticRendezvousTest, BeforeAttemptClearsOnlyOnceEveryNodeArrives) {
  const std::uint16_t port = freePort();
  std::vector<Node> nodes = makeNodes(2, 1, port);
  joinAll(nodes);
  rdzv::StoreClient worker("127.0.0.1", port, 2s);
  worker.set("worker_key", "attempt 0");
  nodes[0]->beforeAttempt(0);  // nothing to clear yet
  EXPECT_TRUE(worker.check({"worker_key"}));

  auto attempt0 = runAsync([&] { nodes[0]->beforeAttempt(1); });
  EXPECT_TRUE(stillRunning(attempt0));
  EXPECT_TRUE(worker.check({"worker_key"}));  // node 1's workers may still use it
  auto attempt1 = runAsync([&] { nodes[1]->beforeAttempt(1); });
  attempt0.get();
  attempt1.get();
  EXPECT_FALSE(worker.check({"worker_key"}));

  // The agents' own protocol survives the clear.
  auto exit0 = runAsync([&] { nodes[0]->exitBarrier(10s); });
  nodes[1]->exitBarrier(10s);
  exit0.get();
}

TEST(StaticRendezvousTest, SingleNodeNeedsNoBarriers) {
  Node node = makeNode(0, 1, 2, 0);
  const WorkerGroup group = node->join();
  EXPECT_EQ(group.world_size, 2);
  EXPECT_EQ(group.store_port, node->port());
  EXPECT_NE(node->port(), 0);
  rdzv::StoreClient worker("127.0.0.1", node->port(), 2s);
  worker.set("worker_key", "x");
  ASSERT_TRUE(worker.check({"worker_key"}));  // SET has no reply: make sure it landed
  node->beforeAttempt(1);
  EXPECT_FALSE(worker.check({"worker_key"}));
  node->exitBarrier(1s);
}

// As a Rendezvous: the first group is the join, each later one the barrier
// before a restart, with the attempt counted up on every node alike.
TEST(StaticRendezvousTest, NextGroupJoinsThenCountsAttempts) {
  const std::uint16_t port = freePort();
  std::vector<Node> nodes = makeNodes(2, 1, port);
  for (int attempt = 0; attempt < 3; ++attempt) {
    auto other = std::async(std::launch::async, [&] { return nodes[1]->nextGroup(); });
    const auto mine = nodes[0]->nextGroup();
    const auto theirs = other.get();
    ASSERT_TRUE(mine && theirs);
    EXPECT_EQ(mine->attempt, attempt);
    EXPECT_EQ(theirs->attempt, attempt);
    EXPECT_EQ(theirs->group_rank, 1);
  }
}

// A node waiting for a peer (or for node 0's store) gives up at once when
// the agent cancels the wait (a signal), instead of after the timeout.
TEST(StaticRendezvousTest, CancelWaitEndsAWaitingNextGroup) {
  const std::uint16_t port = freePort();
  for (int node_rank : {0, 1}) {
    Node node = makeNode(node_rank, 2, 1, port, 60s);
    auto waiting = std::async(std::launch::async, [&] { return node->nextGroup(); });
    EXPECT_EQ(waiting.wait_for(300ms), std::future_status::timeout) << "node " << node_rank;
    const auto cancelled = std::chrono::steady_clock::now();
    node->cancelWait();
    ASSERT_EQ(waiting.wait_for(5s), std::future_status::ready) << "node " << node_rank;
    EXPECT_FALSE(waiting.get()) << "node " << node_rank;
    EXPECT_LT(std::chrono::steady_clock::now() - cancelled, 1500ms) << "node " << node_rank;
  }
}

TEST(StaticRendezvousTest, BadOptionsAreConfigErrors) {
  EXPECT_THROW(makeNode(2, 2, 1, 29500), ConfigError);
  EXPECT_THROW(makeNode(0, 0, 1, 29500), ConfigError);
  EXPECT_THROW(makeNode(1, 2, 1, 0), ConfigError);
  EXPECT_THROW(makeNode(0, 2, 0, 29500), ConfigError);
}

}  // namespace
}  // namespace ddprun::launcher

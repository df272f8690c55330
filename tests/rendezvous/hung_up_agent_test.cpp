// A member killed at the moment a survivor asks about its round: the
// survivor's status question must see the loss even when the daemon reads it
// before the dead member's closed connection. The order is forced with a real
// ddprund on one I/O thread, stopped (SIGSTOP) while the question and then
// the close reach its sockets.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <sstream>
#include <stdexcept>
#include <string>

#include "ddprun/proto/rendezvous_protocol.hpp"
#include "ddprun/proto/rendezvous_status.hpp"
#include "ddprun/rendezvous/client.hpp"
#include "ddprun/test_support/daemon_process.hpp"
#include "ddprun/test_support/eventually.hpp"
#include "test_agent.hpp"

namespace ddprun::rdzv {
namespace {

using namespace std::chrono_literals;
namespace protocol = proto::rendezvous;
using testing::JoinSpec;
using testing::TestAgent;

// Bytes waiting, unread, in the receive queues of the sockets bound to
// `port` on this host (rx_queue of /proc/net/tcp and tcp6).
std::uint64_t unreadBytesOnPort(std::uint16_t port) {
  std::uint64_t unread = 0;
  for (const char* path : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream table(path);
    std::string line;
    std::getline(table, line);  // the header
    while (std::getline(table, line)) {
      std::istringstream fields(line);
      std::string slot, local, remote, state, queues;
      fields >> slot >> local >> remote >> state >> queues;
      const auto colon = local.find(':');
      if (colon == std::string::npos || std::stoul(local.substr(colon + 1), nullptr, 16) != port) {
        continue;
      }
      unread += std::stoull(queues.substr(queues.find(':') + 1), nullptr, 16);
    }
  }
  return unread;
}

// Whether every thread of `pid` has stopped: kill(SIGSTOP) returns before
// they do.
bool allThreadsStopped(pid_t pid) {
  const std::filesystem::path tasks = "/proc/" + std::to_string(pid) + "/task";
  for (const auto& task : std::filesystem::directory_iterator(tasks)) {
    std::ifstream stat(task.path() / "stat");
    std::string line;
    std::getline(stat, line);
    const auto state = line.rfind(')');  // the name, in parentheses, may hold anything
    if (state == std::string::npos || line.substr(state + 2, 1) != "T") {
      return false;
    }
  }
  return true;
}

// Asks `run`'s status on `survivor` while the daemon is stopped, then closes
// `lost`'s connection, then lets the daemon go on: the question is read
// before the close. Throws when the daemon cannot be held in that state.
std::string askBeforeTheCloseIsRead(const test_support::DaemonProcess& daemon,
                                    StoreClient& survivor, TestAgent& lost,
                                    const std::string& run) {
  if (::kill(daemon.pid(), SIGSTOP) != 0 ||
      !test_support::eventually([&] { return allThreadsStopped(daemon.pid()); }, 10s, 1ms)) {
    throw std::runtime_error("the daemon did not stop");
  }
  auto answer = std::async(std::launch::async, [&] {
    return survivor.query(protocol::queryKey(protocol::statusQuestion(run)));
  });
  // The question waits in the daemon's socket before the close does.
  const bool asked =
      test_support::eventually([&] { return unreadBytesOnPort(daemon.port()) > 0; }, 10s, 1ms);
  lost.disconnect();
  ::kill(daemon.pid(), SIGCONT);
  if (!asked) {
    throw std::runtime_error("the question never reached the stopped daemon");
  }
  return answer.get();
}

TEST(HungUpAgentTest, AStatusQuestionReadFirstStillSeesTheMemberWhoseConnectionClosed) {
  test_support::DaemonProcess daemon({"--threads", "1"});
  TestAgent a(daemon.port(), "job7", "a");
  TestAgent b(daemon.port(), "job7", "b");
  const JoinSpec spec{.min_nodes = 2, .max_nodes = 2};
  a.join(spec);
  b.join(spec);
  const protocol::Event round = a.nextEvent();
  ASSERT_EQ(round.type, protocol::EventType::kRound);
  ASSERT_EQ(b.nextEvent().type, protocol::EventType::kRound);
  StoreClient survivor("127.0.0.1", daemon.port(), 10s);

  const protocol::JobStatus status =
      protocol::decodeJobStatus(askBeforeTheCloseIsRead(daemon, survivor, a, "job7"));
  ASSERT_FALSE(status.losses.empty()) << "the answer did not name the member whose connection "
                                         "had closed before it was read";
  EXPECT_EQ(status.losses.front().agent, "a");
  EXPECT_EQ(status.losses.front().round, round.round);
  EXPECT_TRUE(status.losses.front().was_member);
  EXPECT_EQ(status.losses.front().reason, protocol::LossReason::kConnectionClosed);
}

}  // namespace
}  // namespace ddprun::rdzv

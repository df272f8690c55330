// A member killed at the moment a survivor's workers fail: the survivor's
// restart request and its question about the round must find the member
// lost from that round even when the daemon reads them before the dead
// member's closed connection. The order is forced with a real ddprund on
// one I/O thread, stopped (SIGSTOP) while the requests and then the close
// reach its sockets.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>

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

// Bytes waiting, unread, in the receive queues of the connections accepted
// on `port` on this host (rx_queue of /proc/net/tcp and tcp6; a listening
// socket's is its accept backlog, and is left out).
std::uint64_t unreadBytesOnPort(std::uint16_t port) {
  constexpr std::string_view kListening = "0A";
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
      if (state == kListening || colon == std::string::npos ||
          std::stoul(local.substr(colon + 1), nullptr, 16) != port) {
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

// A daemon on one I/O thread, stopped while requests reach its sockets in a
// chosen order, then let go: it reads them in that order. Each step throws
// when the daemon cannot be held so.
class HeldDaemon {
 public:
  explicit HeldDaemon(const test_support::DaemonProcess& daemon) : daemon_(daemon) {
    if (::kill(daemon_.pid(), SIGSTOP) != 0 ||
        !test_support::eventually([&] { return allThreadsStopped(daemon_.pid()); }, 10s, 1ms)) {
      throw std::runtime_error("the daemon did not stop");
    }
  }
  ~HeldDaemon() { ::kill(daemon_.pid(), SIGCONT); }
  HeldDaemon(const HeldDaemon&) = delete;
  HeldDaemon& operator=(const HeldDaemon&) = delete;

  // Runs `request` (which blocks for the answer) on a thread of its own and
  // returns once its bytes wait in the daemon's socket.
  template <typename Request>
  auto send(Request request) {
    const std::uint64_t before = unreadBytesOnPort(daemon_.port());
    auto answer = std::async(std::launch::async, std::move(request));
    if (!test_support::eventually([&] { return unreadBytesOnPort(daemon_.port()) > before; }, 10s,
                                  1ms)) {
      throw std::runtime_error("a request never reached the stopped daemon");
    }
    return answer;
  }

 private:
  const test_support::DaemonProcess& daemon_;
};

// Agents a and b in round `round` of job7; `asker` a third connection.
class HungUpAgentTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const JoinSpec spec{.min_nodes = 2, .max_nodes = 2};
    a_.join(spec);
    b_.join(spec);
    const protocol::Event event = a_.nextEvent();
    ASSERT_EQ(event.type, protocol::EventType::kRound);
    ASSERT_EQ(b_.nextEvent().type, protocol::EventType::kRound);
    round_ = event.round;
    asker_.ping();  // accepted before the daemon is held
  }

  std::string askStatus() {
    return asker_.query(protocol::queryKey(protocol::statusQuestion("job7")));
  }

  test_support::DaemonProcess daemon_{{"--threads", "1"}};
  TestAgent a_{daemon_.port(), "job7", "a"};
  TestAgent b_{daemon_.port(), "job7", "b"};
  StoreClient asker_{"127.0.0.1", daemon_.port(), 10s};
  std::int64_t round_ = -1;
};

void expectLostFrom(const protocol::JobStatus& status, std::int64_t round) {
  ASSERT_FALSE(status.losses.empty()) << "the answer did not name the member whose connection "
                                         "had closed before it was read";
  EXPECT_EQ(status.losses.front().agent, "a");
  EXPECT_EQ(status.losses.front().round, round) << "lost from a round it was never in";
  EXPECT_TRUE(status.losses.front().was_member);
  EXPECT_EQ(status.losses.front().reason, protocol::LossReason::kConnectionClosed);
}

TEST_F(HungUpAgentTest, AStatusQuestionReadFirstStillSeesTheMemberWhoseConnectionClosed) {
  std::future<std::string> answer;
  {
    HeldDaemon held(daemon_);
    answer = held.send([this] { return askStatus(); });
    a_.disconnect();
  }
  expectLostFrom(protocol::decodeJobStatus(answer.get()), round_);
}

// The survivor's agent asks for a restart, then whether its round lost a
// member: the member is lost from the round the failure was in, not from the
// one the restart would have made with it.
TEST_F(HungUpAgentTest, ARestartReadFirstFindsTheMemberLostFromItsRound) {
  std::future<void> restart;
  std::future<std::string> answer;
  {
    HeldDaemon held(daemon_);
    restart = held.send([this] { b_.send(protocol::Verb::kRestart); });
    answer = held.send([this] { return askStatus(); });
    a_.disconnect();
  }
  restart.get();
  expectLostFrom(protocol::decodeJobStatus(answer.get()), round_);
}

}  // namespace
}  // namespace ddprun::rdzv

// The Asio server in-process on loopback port 0, driven by StoreClient:
// round trips, blocking waits, concurrency, and shutdown with clients waiting.
#include "ddprun/rendezvous/server.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <fstream>
#include <future>
#include <sstream>
#include <thread>

#include "ddprun/proto/errors.hpp"
#include "ddprun/rendezvous/client.hpp"
#include "ddprun/test_support/command.hpp"
#include "ddprun/test_support/eventually.hpp"
#include "ddprun/test_support/raw_connection.hpp"

namespace ddprun::rdzv {
namespace {

using namespace std::chrono_literals;

ServerOptions loopbackOptions(int threads = 1) {
  ServerOptions options;
  options.host = "127.0.0.1";
  options.port = 0;
  options.threads = threads;
  return options;
}

// The accept queue is the kernel's largest (net.core.somaxconn), so that a
// start-up storm of ranks is not reset: the listener's Send-Q in `ss`.
TEST(ServerBacklog, IsTheKernelsLargest) {
  Server server(loopbackOptions());
  server.start();
  test_support::CommandOptions options;
  options.env = test_support::withDefaultPath({}, "/usr/sbin:/usr/bin:/sbin:/bin");
  const auto listed = test_support::runCommand(
      {"ss", "-Hltn", "sport = :" + std::to_string(server.port())}, options);
  ASSERT_EQ(listed.code, 0) << listed.errors;
  std::istringstream fields(listed.output);
  std::string state;
  long long waiting = -1;
  long long backlog = -1;
  fields >> state >> waiting >> backlog;
  long long somaxconn = 0;
  std::ifstream("/proc/sys/net/core/somaxconn") >> somaxconn;
  EXPECT_EQ(state, "LISTEN") << listed.output;
  EXPECT_EQ(backlog, somaxconn) << listed.output;
}

class ServerTest : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    server_ = std::make_unique<Server>(loopbackOptions(GetParam()));
    server_->start();
  }

  std::unique_ptr<StoreClient> connect() {
    return std::make_unique<StoreClient>("127.0.0.1", server_->port(), 10s);
  }

  std::unique_ptr<Server> server_;
};

TEST_P(ServerTest, EveryOperationRoundTrips) {
  auto client = connect();
  client->set("/k1", "v1");
  EXPECT_EQ(client->get("/k1"), "v1");
  EXPECT_EQ(client->add("/cnt", 5), 5);
  EXPECT_EQ(client->add("/cnt", -7), -2);
  EXPECT_EQ(client->compareSet("/cs", "", "new"), "new");
  EXPECT_EQ(client->compareSet("/cs", "wrong", "z"), "new");
  EXPECT_TRUE(client->check({"/k1", "/cs"}));
  EXPECT_FALSE(client->check({"/k1", "/nope"}));
  client->append("/ap", "x");
  client->append("/ap", "yz");
  client->multiSet({"/m1", "/m2"}, {"a", "bb"});
  EXPECT_EQ(client->multiGet({"/m1", "/m2", "/ap"}), (std::vector<std::string>{"a", "bb", "xyz"}));
  EXPECT_EQ(client->numKeys(), 6);
  EXPECT_EQ(client->listKeys().size(), 6u);
  EXPECT_TRUE(client->deleteKey("/k1"));
  EXPECT_FALSE(client->deleteKey("/k1"));
  client->ping();
}

TEST_P(ServerTest, BlockedGetIsReleasedByAnotherClientsSet) {
  auto waiter = connect();
  auto setter = connect();
  auto value = std::async(std::launch::async, [&] { return waiter->get("/later"); });
  // The waiter is registered before the set once the server reports it.
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (server_->stats().waiting_clients == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::yield();
  }
  ASSERT_EQ(server_->stats().waiting_clients, 1u);
  setter->set("/later", "here");
  ASSERT_EQ(value.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(value.get(), "here");
}

TEST_P(ServerTest, WaitTimeoutCancelsAndKeepsTheStreamInStep) {
  auto client = connect();
  client->add("/cnt", 3);
  EXPECT_THROW(client->wait({"/never"}, 50ms), TimeoutError);
  EXPECT_EQ(server_->stats().waiting_clients, 0u);
  EXPECT_EQ(client->add("/cnt", 0), 3);
}

TEST_P(ServerTest, ConcurrentClientsCountExactly) {
  constexpr int kClients = 32;
  constexpr int kAddsEach = 200;
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int i = 0; i < kClients; ++i) {
    threads.emplace_back([&] {
      try {
        auto client = connect();
        for (int n = 0; n < kAddsEach; ++n) {
          client->add("/counter", 1);
        }
      } catch (const std::exception&) {
        ++failures;
      }
    });
  }
  for (auto& thread : threads) {
    thread.join();
  }
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(connect()->add("/counter", 0), kClients * kAddsEach);
}

TEST_P(ServerTest, StopReleasesWaitingClientsPromptly) {
  constexpr int kWaiters = 8;
  std::vector<std::future<bool>> outcomes;
  for (int i = 0; i < kWaiters; ++i) {
    outcomes.push_back(std::async(std::launch::async, [this] {
      auto client = connect();
      try {
        client->wait({"/never"}, 60s);
      } catch (const NetworkError&) {
        return true;  // closed by the server's shutdown, as expected
      }
      return false;
    }));
  }
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (server_->stats().waiting_clients < kWaiters &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::yield();
  }
  ASSERT_EQ(server_->stats().waiting_clients, static_cast<std::size_t>(kWaiters));
  const auto stop_started = std::chrono::steady_clock::now();
  server_->stop();
  EXPECT_LT(std::chrono::steady_clock::now() - stop_started, 5s);
  for (auto& outcome : outcomes) {
    ASSERT_EQ(outcome.wait_for(10s), std::future_status::ready);
    EXPECT_TRUE(outcome.get());
  }
}

// A 1.13 client opens a busy main connection, then an idle callback one.
// Alternating them across two threads must not leave one thread all busy.
TEST(ServerBalanceTest, BusyConnectionsOfLegacyClientsSpreadOverThreads) {
  Server server(loopbackOptions(/*threads=*/2));
  server.start();
  constexpr int kClients = 8;
  std::vector<std::unique_ptr<StoreClient>> busy;
  std::vector<test_support::RawConnection> idle;  // connected, never sends
  for (int i = 0; i < kClients; ++i) {
    busy.push_back(std::make_unique<StoreClient>("127.0.0.1", server.port(), 10s));
    busy.back()->add("init/", 1);
    idle.emplace_back(server.port());
  }
  ASSERT_TRUE(
      test_support::eventually([&] { return server.stats().connections == 2 * kClients; }, 10s));
  const auto active = server.stats().active_per_thread;
  ASSERT_EQ(active.size(), 2u);
  EXPECT_EQ(active[0] + active[1], kClients);
  EXPECT_LE(std::abs(active[0] - active[1]), 1) << active[0] << " vs " << active[1];
}

INSTANTIATE_TEST_SUITE_P(Threads, ServerTest, ::testing::Values(1, 4));

TEST(ServerListenTest, BusyPortIsANetworkErrorNamingTheAddress) {
  Server first(loopbackOptions());
  ServerOptions same = loopbackOptions();
  same.port = first.port();
  try {
    Server second(same);
    FAIL() << "a second server bound the same port";
  } catch (const NetworkError& error) {
    EXPECT_NE(std::string(error.what()).find("127.0.0.1:" + std::to_string(first.port())),
              std::string::npos)
        << error.what();
  }
}

TEST(ServerListenTest, HostThatIsNotAnAddressIsAConfigError) {
  ServerOptions options = loopbackOptions();
  options.host = "not-an-address";
  EXPECT_THROW(Server server(options), ConfigError);
}

TEST(ServerListenTest, ServesIpv6LoopbackWhenAvailable) {
  ServerOptions options = loopbackOptions();
  options.host = "::1";
  std::unique_ptr<Server> server;
  try {
    server = std::make_unique<Server>(options);
  } catch (const NetworkError& error) {
    GTEST_SKIP() << "no IPv6 loopback here: " << error.what();
  }
  server->start();
  StoreClient client("::1", server->port(), 10s);
  client.set("/v6", "yes");
  EXPECT_EQ(client.get("/v6"), "yes");
}

}  // namespace
}  // namespace ddprun::rdzv

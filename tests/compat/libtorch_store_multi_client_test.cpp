// LibTorch 1.13 TCPStore clients interacting through ddprund: concurrent
// adds, waits and gets released by another client, watchKey callbacks on the
// dialect-A callback connection, and PrefixStore layered on top.
#include <gtest/gtest.h>

#include <algorithm>
#include <condition_variable>
#include <future>
#include <mutex>
#include <numeric>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <utility>

#include "libtorch_store_fixture.hpp"

namespace ddprun::compat_test {
namespace {

// Records watchKey callbacks, which LibTorch runs on its listener thread.
class WatchLog {
 public:
  using Event = std::pair<std::optional<std::string>, std::optional<std::string>>;

  c10d::WatchKeyCallback callback() {
    return [this](c10::optional<std::string> old_value, c10::optional<std::string> new_value) {
      std::lock_guard lock(mutex_);
      events_.emplace_back(toStd(old_value), toStd(new_value));
      changed_.notify_all();
    };
  }

  // The events once there are `count` of them, or whatever came by the deadline.
  std::vector<Event> waitFor(std::size_t count) {
    std::unique_lock lock(mutex_);
    changed_.wait_for(lock, kStoreTimeout, [&] { return events_.size() >= count; });
    return events_;
  }

 private:
  static std::optional<std::string> toStd(const c10::optional<std::string>& value) {
    return value ? std::optional<std::string>(*value) : std::nullopt;
  }

  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<Event> events_;
};

WatchLog::Event created(const std::string& value) { return {std::nullopt, value}; }
WatchLog::Event updated(const std::string& from, const std::string& to) { return {from, to}; }
WatchLog::Event deleted(const std::string& value) { return {value, std::nullopt}; }

template <typename T>
bool stillBlocked(std::future<T>& pending, std::chrono::milliseconds how_long) {
  return pending.wait_for(how_long) == std::future_status::timeout;
}

template <typename T>
T resultWithin(std::future<T>& pending, std::chrono::milliseconds deadline) {
  if (pending.wait_for(deadline) != std::future_status::ready) {
    ADD_FAILURE() << "blocked call was not released";
    return T{};
  }
  return pending.get();
}

TEST_F(LibtorchStoreTest, ConcurrentAddsFromSixteenClientsAreExact) {
  constexpr int kClients = 16;
  constexpr int kAddsEach = 200;
  std::vector<std::vector<std::int64_t>> seen(kClients);
  std::vector<std::future<void>> clients;
  for (int i = 0; i < kClients; ++i) {
    clients.push_back(std::async(std::launch::async, [&, i] {
      auto store = connect(kClients);
      for (int n = 0; n < kAddsEach; ++n) {
        seen[i].push_back(store->add("counter", 1));
      }
    }));
  }
  for (auto& client : clients) {
    client.get();  // rethrows a client's failure here, on the test thread
  }
  // Atomic adds hand out every value from 1 to the total exactly once.
  std::vector<std::int64_t> all;
  for (const auto& values : seen) {
    all.insert(all.end(), values.begin(), values.end());
  }
  std::sort(all.begin(), all.end());
  std::vector<std::int64_t> expected(kClients * kAddsEach);
  std::iota(expected.begin(), expected.end(), 1);
  EXPECT_EQ(all, expected);
  EXPECT_EQ(connect()->add("counter", 0), kClients * kAddsEach);
}

TEST_F(LibtorchStoreTest, BlockedGetsAreReleasedByAnotherClientsSet) {
  constexpr int kGetters = 4;
  std::vector<c10::intrusive_ptr<c10d::TCPStore>> getters;
  std::vector<std::future<std::vector<std::uint8_t>>> pending;
  for (int i = 0; i < kGetters; ++i) {
    getters.push_back(connect());
    pending.push_back(
        std::async(std::launch::async, [store = getters.back()] { return store->get("late"); }));
  }
  // A server that answered the WAIT at once would release the gets with an
  // empty value here.
  EXPECT_TRUE(stillBlocked(pending.front(), kShortWait));
  for (auto& get : pending) {
    EXPECT_TRUE(stillBlocked(get, 0ms));
  }
  connect()->set("late", bytes("here"));
  for (auto& get : pending) {
    EXPECT_EQ(text(resultWithin(get, kStoreTimeout)), "here");
  }
}

TEST_F(LibtorchStoreTest, WaitOnSeveralKeysReturnsOnlyWhenTheLastIsSet) {
  auto waiter = connect();
  auto writer = connect();
  auto done = std::async(std::launch::async, [&] { waiter->wait({"a", "b"}, kStoreTimeout); });
  writer->set("a", bytes("1"));
  EXPECT_TRUE(stillBlocked(done, kShortWait));
  writer->add("b", 1);
  EXPECT_FALSE(stillBlocked(done, kStoreTimeout));
  done.get();  // rethrows if the wait failed
}

TEST_F(LibtorchStoreTest, AnotherClientsSetAfterAWaitTimeoutDoesNotShiftReplies) {
  // docs/tcpstore-protocol.md §8.2: 1.13 abandons a timed-out WAIT without telling
  // the server. ddprund drops the registration when the next request arrives,
  // so the later SET must not send this client a stray STOP_WAITING byte.
  auto waiter = connect(2);
  auto setter = connect(2);
  EXPECT_EQ(waiter->add("cnt", -2), -2);
  expectSocketTimeout([&] { waiter->wait({"missing"}, kShortWait); });
  EXPECT_EQ(waiter->add("cnt", 0), -2);
  setter->set("missing", bytes("now-set"));
  // The setter's round trip orders its SET (and any STOP_WAITING the server
  // still owed) before the waiter's next request.
  EXPECT_EQ(text(setter->get("missing")), "now-set");
  EXPECT_EQ(waiter->add("cnt", 0), -2);
  EXPECT_EQ(waiter->add("cnt", 5), 3);
  EXPECT_EQ(text(waiter->get("missing")), "now-set");
}

TEST_F(LibtorchStoreTest, WatchKeyCallbacksFireOnSetCompareSetAndDelete) {
  WatchLog log;  // declared first: it must outlive the client that calls it
  auto watcher = connect();
  auto writer = connect();
  watcher->watchKey("watched", log.callback());
  writer->set("watched", bytes("v1"));
  writer->set("watched", bytes("v2"));
  writer->compareSet("watched", bytes("wrong"), bytes("ignored"));  // no change, no event
  writer->compareSet("watched", bytes("v2"), bytes("v3"));
  writer->deleteKey("watched");
  writer->deleteKey("watched");  // nothing deleted, no event
  writer->set("watched", bytes("v4"));
  const std::vector<WatchLog::Event> expected{created("v1"), updated("v1", "v2"),
                                              updated("v2", "v3"), deleted("v3"), created("v4")};
  EXPECT_EQ(log.waitFor(expected.size()), expected);
  // Nothing beyond those: an extra event would show up behind this marker.
  writer->set("watched", bytes("v5"));
  EXPECT_EQ(log.waitFor(expected.size() + 1).back(), updated("v4", "v5"));
}

TEST_F(LibtorchStoreTest, WatchKeyCallbacksFireOnAdd) {
  WatchLog log;
  auto watcher = connect();
  watcher->watchKey("counter", log.callback());
  // The watcher's own main connection counts as much as another client's.
  watcher->add("counter", 3);
  watcher->add("counter", -1);
  const std::vector<WatchLog::Event> expected{created("3"), updated("3", "2")};
  EXPECT_EQ(log.waitFor(expected.size()), expected);
}

TEST_F(LibtorchStoreTest, PrefixStoreOverTheDaemonNamespacesKeys) {
  auto raw = connect();
  auto attempt0 = c10::make_intrusive<c10d::PrefixStore>("job/attempt_0", raw);
  auto attempt1 = c10::make_intrusive<c10d::PrefixStore>("job/attempt_1", connect());

  attempt0->set("rank_0", bytes("a0"));
  attempt1->set("rank_0", bytes("a1"));
  EXPECT_EQ(text(attempt0->get("rank_0")), "a0");
  EXPECT_EQ(text(attempt1->get("rank_0")), "a1");
  // PrefixStore joins with "/"; the TCPStore below adds its own leading "/".
  EXPECT_EQ(text(raw->get("job/attempt_0/rank_0")), "a0");

  EXPECT_EQ(attempt0->add("barrier", 1), 1);
  EXPECT_EQ(attempt1->add("barrier", 1), 1);
  EXPECT_EQ(raw->add("job/attempt_0/barrier", 0), 1);
  EXPECT_EQ(text(attempt0->compareSet("cs", bytes(""), bytes("x"))), "x");
  EXPECT_TRUE(attempt0->check({"rank_0", "barrier", "cs"}));
  EXPECT_FALSE(attempt1->check({"cs"}));
  attempt0->wait({"rank_0", "cs"}, kShortWait);
  expectSocketTimeout([&] { attempt1->wait({"cs"}, kShortWait); });
  EXPECT_TRUE(attempt0->deleteKey("cs"));
  EXPECT_FALSE(raw->check({"job/attempt_0/cs"}));
  // getNumKeys is not prefixed: the one init/ counter both clients added to,
  // plus rank_0 and barrier under each prefix.
  EXPECT_EQ(attempt1->getNumKeys(), 5);
}

TEST_F(LibtorchStoreTest, PrefixStoreWatchKeyWatchesThePrefixedKey) {
  WatchLog log;
  auto watcher = c10::make_intrusive<c10d::PrefixStore>("pg", connect());
  auto writer = connect();
  watcher->watchKey("rank_1", log.callback());
  writer->set("rank_1", bytes("unprefixed"));  // a different key: no event
  writer->set("pg/rank_1", bytes("addr"));
  const std::vector<WatchLog::Event> expected{created("addr")};
  EXPECT_EQ(log.waitFor(1), expected);
}

}  // namespace
}  // namespace ddprun::compat_test

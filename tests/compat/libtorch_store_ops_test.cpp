// Every operation of LibTorch 1.13's c10d::TCPStore client, one client at a
// time, against ddprund. Expected values follow PyTorch 1.13's own server as
// captured (docs/tcpstore-protocol.md §7).
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "ddprun/test_support/raw_connection.hpp"
#include "libtorch_store_fixture.hpp"

namespace ddprun::compat_test {
namespace {

// Reads the "init/" counter over a raw dialect-A connection: the 1.13 client
// always prefixes user keys with "/", so it cannot name "init/" itself.
std::int64_t readInitCounter(std::uint16_t port) {
  test_support::RawConnection raw(port);
  std::string request("\x03", 1);  // ADD
  const std::string key = "init/";
  const std::uint64_t key_length = key.size();
  request.append(reinterpret_cast<const char*>(&key_length), sizeof key_length);
  request += key;
  request.append(sizeof(std::int64_t), '\0');  // delta 0
  EXPECT_TRUE(raw.sendAll(request));
  const auto reply = raw.recvExact(sizeof(std::int64_t), kStoreTimeout);
  if (!reply) {
    ADD_FAILURE() << "no reply to ADD init/ 0";
    return -1;
  }
  std::int64_t value = 0;
  reply->copy(reinterpret_cast<char*>(&value), sizeof value);
  return value;
}

TEST_F(LibtorchStoreTest, ConnectingWithWorldSizeAddsToInitCounter) {
  auto first = connect(3);
  auto second = connect(3);
  auto third = connect(3);
  EXPECT_EQ(readInitCounter(port()), 3);
  // "init/" is an ordinary key, the only one so far.
  EXPECT_EQ(first->getNumKeys(), 1);
  auto withoutWorldSize = connect(std::nullopt);
  EXPECT_EQ(readInitCounter(port()), 3);
}

TEST_F(LibtorchStoreTest, SetThenGetReturnsLatestValue) {
  auto store = connect();
  store->set("k1", bytes("v1"));
  EXPECT_EQ(text(store->get("k1")), "v1");
  store->set("k1", bytes("v2"));
  EXPECT_EQ(text(store->get("k1")), "v2");

  const std::string binary("\0\xff\0 binary\n", 11);
  store->set("bin", bytes(binary));
  EXPECT_EQ(text(store->get("bin")), binary);

  std::vector<std::uint8_t> big(1 << 20);  // several TCP segments each way
  for (std::size_t i = 0; i < big.size(); ++i) {
    big[i] = static_cast<std::uint8_t>(i * 31);
  }
  store->set("big", big);
  EXPECT_EQ(store->get("big"), big);
}

TEST_F(LibtorchStoreTest, AddCountsFromZeroAndAcceptsNegativeDeltas) {
  auto store = connect();
  EXPECT_EQ(store->add("cnt", 5), 5);
  EXPECT_EQ(store->add("cnt", 0), 5);
  EXPECT_EQ(store->add("cnt", -7), -2);
  EXPECT_EQ(text(store->get("cnt")), "-2");  // stored as ASCII decimal
  store->set("num", bytes("40"));
  EXPECT_EQ(store->add("num", 2), 42);
  EXPECT_EQ(store->add("big", INT64_C(1) << 40), INT64_C(1) << 40);
}

TEST_F(LibtorchStoreTest, CompareSetFollowsTheFourReferenceCases) {
  auto store = connect();
  // Absent key, empty expected: stored, reply is the new value.
  EXPECT_EQ(text(store->compareSet("cs", bytes(""), bytes("new"))), "new");
  // Absent key, non-empty expected: reply is `expected`, nothing stored.
  EXPECT_EQ(text(store->compareSet("cs2", bytes("x"), bytes("y"))), "x");
  EXPECT_FALSE(store->check({"cs2"}));
  // Present and equal: replaced, reply is the new value.
  EXPECT_EQ(text(store->compareSet("cs", bytes("new"), bytes("newer"))), "newer");
  // Present and different: unchanged, reply is the current value.
  EXPECT_EQ(text(store->compareSet("cs", bytes("wrong"), bytes("z"))), "newer");
  EXPECT_EQ(text(store->get("cs")), "newer");
}

TEST_F(LibtorchStoreTest, CheckReportsWhetherAllKeysExist) {
  auto store = connect();
  EXPECT_TRUE(store->check({}));
  EXPECT_FALSE(store->check({"alive"}));
  store->set("alive", bytes("1"));
  EXPECT_TRUE(store->check({"alive"}));
  EXPECT_FALSE(store->check({"alive", "nope"}));
}

TEST_F(LibtorchStoreTest, GetNumKeysCountsEveryKeyIncludingInit) {
  auto store = connect();
  EXPECT_EQ(store->getNumKeys(), 1);  // init/
  store->set("a", bytes("1"));
  store->add("b", 1);
  store->compareSet("c", bytes(""), bytes("1"));
  EXPECT_EQ(store->getNumKeys(), 4);
  store->deleteKey("a");
  EXPECT_EQ(store->getNumKeys(), 3);
}

TEST_F(LibtorchStoreTest, DeleteKeyReportsWhetherTheKeyExisted) {
  auto store = connect();
  store->set("doomed", bytes("x"));
  EXPECT_TRUE(store->deleteKey("doomed"));
  EXPECT_FALSE(store->deleteKey("doomed"));
  EXPECT_FALSE(store->check({"doomed"}));
  // A deleted key is waited on again, not remembered as once-present.
  expectSocketTimeout([&] { store->wait({"doomed"}, kShortWait); });
  EXPECT_EQ(store->add("after", 1), 1);
}

TEST_F(LibtorchStoreTest, WaitReturnsOnceKeysExist) {
  auto store = connect();
  store->wait({});
  store->set("a", bytes("1"));
  store->set("b", bytes("2"));
  store->wait({"a", "b"});
  store->wait({"a", "b", "a"}, kShortWait);
}

TEST_F(LibtorchStoreTest, WaitTimesOutAndTheNextOpsStillGetTheirOwnReplies) {
  auto store = connect();
  EXPECT_EQ(store->add("cnt", -2), -2);
  const auto waited = expectSocketTimeout([&] { store->wait({"missing"}, kShortWait); });
  EXPECT_GE(waited, kShortWait - 50ms);
  EXPECT_EQ(store->add("cnt", 0), -2);
  // This client's own SET of the abandoned key: a server that kept the stale
  // registration would now send a stray STOP_WAITING byte, shifting every
  // later reply on this connection by one byte.
  store->set("missing", bytes("now-set"));
  EXPECT_EQ(store->add("cnt", 1), -1);
  EXPECT_EQ(text(store->get("missing")), "now-set");
}

TEST_F(LibtorchStoreTest, GetUsesTheStoreTimeoutSetBySetTimeout) {
  auto store = connect();
  store->setTimeout(std::chrono::milliseconds(kShortWait));
  const auto waited = expectSocketTimeout([&] { store->get("never-set"); });
  EXPECT_GE(waited, kShortWait - 50ms);
  EXPECT_LT(waited, kStoreTimeout);
  EXPECT_EQ(store->add("cnt", 3), 3);
  store->setTimeout(kStoreTimeout);
  store->set("never-set", bytes("at-last"));
  EXPECT_EQ(text(store->get("never-set")), "at-last");
  EXPECT_EQ(store->add("cnt", 0), 3);
}

}  // namespace
}  // namespace ddprun::compat_test

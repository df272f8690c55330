// KeySpace semantics without sockets: every command, the WAIT bookkeeping,
// watches and queues. Deliveries to other clients are recorded by FakeSink.
#include "ddprun/rendezvous/key_space.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <deque>
#include <map>

#include "ddprun/rendezvous/store_state.hpp"

namespace ddprun::rdzv {
namespace {

using proto::Command;
using proto::Dialect;

class FakeSink : public ClientSink {
 public:
  void deliver(ClientId client, std::string_view bytes) override {
    delivered[client].append(bytes);
  }
  std::map<ClientId, std::string> delivered;
};

std::string i64Bytes(std::int64_t value) {
  std::string out;
  proto::WireWriter(out).i64(value);
  return out;
}

std::string bytesField(std::string_view value) {
  std::string out;
  proto::WireWriter(out).bytes(value);
  return out;
}

class KeySpaceTest : public ::testing::Test {
 protected:
  // Runs a request built from `keys`/`values` (kept alive by the caller's
  // literals) and returns the reply; fails the test if it closes.
  std::string run(ClientId client, Command command, std::vector<std::string_view> keys = {},
                  std::vector<std::string_view> values = {}, std::int64_t number = 0,
                  Dialect dialect = Dialect::Modern) {
    const proto::Request request =
        proto::makeRequest(command, std::move(keys), std::move(values), number);
    std::string reply;
    auto error = space.execute(client, dialect, request, reply);
    EXPECT_FALSE(error.has_value()) << *error;
    return reply;
  }

  std::optional<std::string> runExpectingError(Command command, std::string_view key,
                                               std::int64_t number) {
    const proto::Request request = proto::makeRequest(command, {key}, {}, number);
    std::string reply;
    auto error = space.execute(1, Dialect::Modern, request, reply);
    EXPECT_TRUE(reply.empty());
    return error;
  }

  FakeSink sink;
  KeySpace space{sink};
};

TEST_F(KeySpaceTest, SetThenGetReturnsValueAndMissingKeyIsEmpty) {
  EXPECT_EQ(run(1, Command::Set, {"/k1"}, {"v1"}), "");
  EXPECT_EQ(run(1, Command::Get, {"/k1"}), bytesField("v1"));
  EXPECT_EQ(run(1, Command::Get, {"/nope"}), bytesField(""));
}

TEST_F(KeySpaceTest, AddFollowsStollAndStoresDecimalText) {
  EXPECT_EQ(run(1, Command::Add, {"/cnt"}, {}, 5), i64Bytes(5));
  EXPECT_EQ(run(1, Command::Add, {"/cnt"}, {}, -7), i64Bytes(-2));
  EXPECT_EQ(run(1, Command::Get, {"/cnt"}), bytesField("-2"));
  run(1, Command::Set, {"/loose"}, {"  +12abc"});
  EXPECT_EQ(run(1, Command::Add, {"/loose"}, {}, 1), i64Bytes(13));
}

TEST_F(KeySpaceTest, AddOnTextOrOverflowIsAnErrorAndChangesNothing) {
  run(1, Command::Set, {"/text"}, {"abc"});
  EXPECT_TRUE(runExpectingError(Command::Add, "/text", 1).has_value());
  EXPECT_EQ(run(1, Command::Get, {"/text"}), bytesField("abc"));
  run(1, Command::Set, {"/big"}, {"9223372036854775807"});
  EXPECT_TRUE(runExpectingError(Command::Add, "/big", 1).has_value());
  run(1, Command::Set, {"/huge"}, {"99999999999999999999"});
  EXPECT_TRUE(runExpectingError(Command::Add, "/huge", 0).has_value());
}

TEST_F(KeySpaceTest, CompareSetFollowsPyTorchsFourCases) {
  EXPECT_EQ(run(1, Command::CompareSet, {"/cs"}, {"", "new"}), bytesField("new"));
  EXPECT_EQ(run(1, Command::CompareSet, {"/cs2"}, {"x", "y"}), bytesField("x"));
  EXPECT_EQ(run(1, Command::Check, {"/cs2"}), std::string(1, '\1'));  // nothing stored
  EXPECT_EQ(run(1, Command::CompareSet, {"/cs"}, {"new", "newer"}), bytesField("newer"));
  EXPECT_EQ(run(1, Command::CompareSet, {"/cs"}, {"wrong", "z"}), bytesField("newer"));
}

TEST_F(KeySpaceTest, WaitRepliesAtOnceWhenKeysExistAndWithZeroKeys) {
  run(1, Command::Set, {"/a"}, {"1"});
  EXPECT_EQ(run(1, Command::Wait, {"/a"}), std::string(1, '\0'));
  EXPECT_EQ(run(1, Command::Wait, {}), std::string(1, '\0'));
}

TEST_F(KeySpaceTest, WaitCompletesWhenTheLastKeyArrivesCountingDuplicates) {
  EXPECT_EQ(run(7, Command::Wait, {"/a", "/b", "/a"}), "");
  run(1, Command::Set, {"/b"}, {"x"});
  EXPECT_FALSE(sink.delivered.contains(7));
  run(1, Command::Add, {"/a"}, {}, 1);  // one SET of /a satisfies both occurrences
  EXPECT_EQ(sink.delivered[7], std::string(1, '\0'));
  EXPECT_FALSE(space.hasPendingWait(7));
}

TEST_F(KeySpaceTest, EveryCreatingCommandWakesWaiters) {
  run(2, Command::Wait, {"/s"});
  run(3, Command::Wait, {"/ap"});
  run(4, Command::Wait, {"/ms"});
  run(5, Command::Wait, {"/cas"});
  run(1, Command::Set, {"/s"}, {"1"});
  run(1, Command::Append, {"/ap"}, {"x"});
  run(1, Command::MultiSet, {"/ms", "/other"}, {"1", "2"});
  run(1, Command::CompareSet, {"/cas"}, {"", "v"});
  for (ClientId waiter : {2, 3, 4, 5}) {
    EXPECT_EQ(sink.delivered[waiter], std::string(1, '\0')) << "client " << waiter;
  }
}

TEST_F(KeySpaceTest, FailedCompareSetAndDeleteDoNotWake) {
  run(2, Command::Wait, {"/k"});
  run(1, Command::CompareSet, {"/k"}, {"expected", "v"});
  run(1, Command::Set, {"/gone"}, {"1"});
  run(1, Command::DeleteKey, {"/gone"});
  EXPECT_TRUE(sink.delivered.empty());
  EXPECT_TRUE(space.hasPendingWait(2));
}

TEST_F(KeySpaceTest, DeletedKeyIsAwaitedAgain) {
  run(1, Command::Set, {"/k"}, {"1"});
  EXPECT_EQ(run(1, Command::DeleteKey, {"/k"}), i64Bytes(1));
  EXPECT_EQ(run(1, Command::DeleteKey, {"/k"}), i64Bytes(0));
  EXPECT_EQ(run(2, Command::Wait, {"/k"}), "");
  run(1, Command::Set, {"/k"}, {"2"});
  EXPECT_EQ(sink.delivered[2], std::string(1, '\0'));
}

TEST_F(KeySpaceTest, CancelWaitAlwaysRepliesCanceledAndUnregisters) {
  EXPECT_EQ(run(2, Command::CancelWait), std::string(1, '\1'));  // nothing pending
  run(2, Command::Wait, {"/k"});
  EXPECT_EQ(run(2, Command::CancelWait), std::string(1, '\1'));
  run(1, Command::Set, {"/k"}, {"1"});
  EXPECT_TRUE(sink.delivered.empty());
}

TEST_F(KeySpaceTest, LegacyRequestCancelsAStaleWaitButModernDoesNot) {
  run(2, Command::Wait, {"/late"}, {}, 0, Dialect::Legacy113);
  run(2, Command::Add, {"/cnt"}, {}, 1, Dialect::Legacy113);  // 1.13 gave up waiting
  EXPECT_FALSE(space.hasPendingWait(2));
  run(3, Command::Wait, {"/late"}, {}, 0, Dialect::Modern);
  run(3, Command::Ping, {}, {}, 0, Dialect::Modern);
  EXPECT_TRUE(space.hasPendingWait(3));
  run(1, Command::Set, {"/late"}, {"1"});
  EXPECT_FALSE(sink.delivered.contains(2));
  EXPECT_EQ(sink.delivered[3], std::string(1, '\0'));
}

TEST_F(KeySpaceTest, ForgottenClientIsNeitherWokenNorNotified) {
  run(2, Command::Wait, {"/k"});
  run(2, Command::WatchKey, {"/k"});
  space.forgetClient(2);
  run(1, Command::Set, {"/k"}, {"1"});
  EXPECT_TRUE(sink.delivered.empty());
  EXPECT_EQ(space.waitingClients(), 0u);
}

TEST_F(KeySpaceTest, WatchNotificationsMatchPyTorch113Bytes) {
  EXPECT_EQ(run(9, Command::WatchKey, {"/watched"}), std::string(1, '\3'));
  run(1, Command::Set, {"/watched"}, {"v1"});
  // Captured from a 1.13 server: KEY_CREATED, key, empty old value, new value.
  std::string created =
      std::string(1, '\1') + bytesField("/watched") + bytesField("") + bytesField("v1");
  EXPECT_EQ(sink.delivered[9], created);
  sink.delivered.clear();
  run(1, Command::DeleteKey, {"/watched"});
  std::string deleted =
      std::string(1, '\2') + bytesField("/watched") + bytesField("v1") + bytesField("");
  EXPECT_EQ(sink.delivered[9], deleted);
}

TEST_F(KeySpaceTest, QueuesPopInOrderAndReportLengthBeforePop) {
  run(1, Command::QueuePush, {"/q"}, {"a"});
  run(1, Command::QueuePush, {"/q"}, {"bb"});
  EXPECT_EQ(run(1, Command::QueueLen, {"/q"}), i64Bytes(2));
  EXPECT_EQ(run(1, Command::QueuePop, {"/q"}), i64Bytes(2) + bytesField("a"));
  EXPECT_EQ(run(1, Command::QueuePop, {"/q"}), i64Bytes(1) + bytesField("bb"));
  EXPECT_EQ(run(1, Command::QueuePop, {"/q"}), i64Bytes(0));
  EXPECT_EQ(run(1, Command::Get, {"/q"}), bytesField(""));  // queues are not KV keys
}

TEST_F(KeySpaceTest, QueuePushWakesOnlyOneWaiterAndCheckSeesQueues) {
  run(2, Command::Wait, {"/q"});
  run(3, Command::Wait, {"/q"});
  run(1, Command::QueuePush, {"/q"}, {"item"});
  EXPECT_EQ(sink.delivered.size(), 1u);
  EXPECT_TRUE(sink.delivered.contains(2));
  EXPECT_TRUE(space.hasPendingWait(3));
  EXPECT_EQ(run(1, Command::Check, {"/q"}), std::string(1, '\0'));
}

TEST_F(KeySpaceTest, NumKeysListAndMultiGetSeeEveryKey) {
  run(1, Command::MultiSet, {"/m1", "/m2"}, {"a", "bb"});
  run(1, Command::Add, {"init/"}, {}, 1);
  EXPECT_EQ(run(1, Command::GetNumKeys), i64Bytes(3));
  EXPECT_EQ(run(1, Command::MultiGet, {"/m1", "/nope", "/m2"}),
            bytesField("a") + bytesField("") + bytesField("bb"));
  const std::string listed = run(1, Command::List);
  EXPECT_EQ(listed.substr(0, 8), i64Bytes(3));
  EXPECT_NE(listed.find(bytesField("init/")), std::string::npos);
}

TEST_F(KeySpaceTest, ClearDataEmptiesValuesAndQueuesButKeepsWaiters) {
  run(1, Command::Set, {"/a"}, {"1"});
  run(1, Command::QueuePush, {"/q"}, {"x"});
  run(2, Command::Wait, {"/later"});
  space.clearData();
  EXPECT_EQ(space.numKeys(), 0u);
  EXPECT_EQ(run(1, Command::QueueLen, {"/q"}), i64Bytes(0));
  EXPECT_EQ(run(1, Command::Check, {"/a"}), std::string(1, '\1'));
  run(1, Command::Set, {"/later"}, {"now"});
  EXPECT_EQ(sink.delivered[2], std::string(1, '\0'));
}

// footprint() keeps running totals (O(1) by construction: it reads three
// sizes); this checks them against a full recount after every kind of
// change, taken from what the store answers: List for the keys, GET for
// their values, and the test's own record of the queues.
class FootprintTest : public KeySpaceTest {
 protected:
  std::size_t recountedBytes() {
    // List's reply: a count, then each key as an 8-byte length and its bytes
    // (the WireWriter's host-order integers).
    const std::string listed = run(1, Command::List);
    const auto u64At = [&](std::size_t at) {
      std::uint64_t value = 0;
      std::memcpy(&value, listed.data() + at, sizeof value);
      return value;
    };
    std::size_t bytes = 0;
    std::size_t at = 8;
    for (std::uint64_t i = 0, count = u64At(0); i < count; ++i) {
      const std::string key = listed.substr(at + 8, u64At(at));
      at += 8 + key.size();
      const std::string value = run(1, Command::Get, {key});
      bytes += key.size() + value.size() - 8;  // GET's reply: an 8-byte length, then the value
    }
    for (const auto& [key, items] : queues) {
      bytes += key.size();
      for (const std::string& item : items) {
        bytes += item.size();
      }
    }
    return bytes;
  }

  void expectRecounted(const char* after) {
    const KeySpace::Footprint held = space.footprint();
    EXPECT_EQ(held.bytes, recountedBytes()) << "after " << after;
    EXPECT_EQ(held.keys, space.numKeys() + queues.size()) << "after " << after;
  }

  std::map<std::string, std::deque<std::string>> queues;
};

TEST_F(FootprintTest, RunningTotalsMatchARecountAfterEveryKindOfChange) {
  run(1, Command::Set, {"/a"}, {"1"});
  expectRecounted("a SET creating");
  run(1, Command::Set, {"/a"}, {"longer"});
  expectRecounted("a SET replacing");
  run(1, Command::Add, {"/n"}, {}, 5);
  run(1, Command::Add, {"/n"}, {}, 100);
  expectRecounted("ADDs");
  run(1, Command::CompareSet, {"/a"}, {"longer", "x"});
  run(1, Command::CompareSet, {"/new"}, {"", "created"});
  run(1, Command::CompareSet, {"/a"}, {"wrong", "unused"});
  expectRecounted("COMPARE_SETs");
  run(1, Command::Append, {"/a"}, {"yz"});
  run(2, Command::WatchKey, {"/w"});
  run(1, Command::Append, {"/w"}, {"q"});
  run(1, Command::Append, {"/w"}, {"rr"});
  expectRecounted("APPENDs, watched and not");
  run(1, Command::MultiSet, {"/c", "/d"}, {"ccc", "dddd"});
  run(1, Command::DeleteKey, {"/c"});
  run(1, Command::DeleteKey, {"/missing"});
  expectRecounted("MULTI_SET and DELETEs");
  run(1, Command::QueuePush, {"/q"}, {"item1"});
  run(1, Command::QueuePush, {"/q"}, {"it2"});
  queues["/q"] = {"item1", "it2"};
  expectRecounted("queue pushes");
  run(1, Command::QueuePop, {"/q"});
  queues["/q"].pop_front();
  expectRecounted("a queue pop");
  run(1, Command::QueuePop, {"/q"});
  run(1, Command::QueuePop, {"/q"});
  queues.clear();
  expectRecounted("a queue emptied");
  space.publish("/e", "event");
  expectRecounted("publish");
  space.unpublish("/e");
  expectRecounted("unpublish");
  run(1, Command::QueuePush, {"/q2"}, {"left"});
  space.clearData();
  queues.clear();
  expectRecounted("clearData");
  EXPECT_EQ(space.footprint().bytes, 0u);
}

TEST(StoreStateTest, KeySpacesAreIsolatedAndDroppable) {
  FakeSink sink;
  StoreState state(sink);
  std::string reply;
  const proto::Request set = proto::makeRequest(Command::Set, {"/k"}, {"job-a"});
  ASSERT_FALSE(state.keySpace("job-a").execute(1, Dialect::Modern, set, reply));
  EXPECT_EQ(state.keySpace("job-a").numKeys(), 1u);
  EXPECT_EQ(state.keySpace("job-b").numKeys(), 0u);
  EXPECT_TRUE(state.dropKeySpace("job-a"));
  EXPECT_FALSE(state.dropKeySpace("job-a"));
  EXPECT_EQ(state.keySpace("job-a").numKeys(), 0u);
}

// Every space of a StoreState charges one budget: names, values, queued
// items and a fixed charge per key and item. A write past it is refused and
// changes nothing; deleting, popping, replacing with less and dropping a
// space give budget back; the daemon's own events are never refused.
TEST(StoreStateTest, TheSpacesShareOneMemoryBudgetThatRefusesWritesPastIt) {
  constexpr std::size_t kKey = MemoryBudget::kPerKeyBytes;
  constexpr std::size_t kItem = MemoryBudget::kPerItemBytes;
  FakeSink sink;
  StoreState state(sink, 2 * (2 + 100 + kKey));
  KeySpace& a = state.keySpace("a");
  KeySpace& b = state.keySpace("b");
  const std::string hundred(100, 'v');
  const auto execute = [](KeySpace& space, Command command, std::vector<std::string_view> keys,
                          std::vector<std::string_view> values = {}) {
    std::string reply;
    return space.execute(1, Dialect::Modern, proto::makeRequest(command, keys, values), reply);
  };
  ASSERT_FALSE(execute(a, Command::Set, {"/1"}, {hundred}));
  ASSERT_FALSE(execute(b, Command::Set, {"/2"}, {hundred}));
  EXPECT_EQ(state.budget().used(), state.budget().limit());
  const auto refused = execute(a, Command::Set, {"/3"}, {"x"});
  ASSERT_TRUE(refused);
  EXPECT_NE(refused->find("--max-memory"), std::string::npos) << *refused;
  EXPECT_TRUE(execute(b, Command::Append, {"/2"}, {"x"}));
  EXPECT_TRUE(execute(a, Command::MultiSet, {"/1", "/4"}, {"", "x"}));
  EXPECT_TRUE(execute(a, Command::QueuePush, {"/q"}, {""}));
  EXPECT_EQ(a.numKeys() + b.numKeys(), 2u);                   // the refusals changed nothing
  ASSERT_FALSE(execute(a, Command::Set, {"/1"}, {"short"}));  // a smaller value always fits
  ASSERT_FALSE(execute(b, Command::DeleteKey, {"/2"}));
  ASSERT_FALSE(execute(a, Command::QueuePush, {"/q"}, {"item"}));
  EXPECT_EQ(state.budget().used(), (2 + 5 + kKey) + (2 + kKey) + (4 + kItem));
  b.publish("ddprun/rdzv/job/events/x/0/0", std::string(1000, 'e'));  // over, and kept
  EXPECT_GT(state.budget().used(), state.budget().limit());
  ASSERT_FALSE(execute(b, Command::DeleteKey, {"ddprun/rdzv/job/events/x/0/0"}));
  ASSERT_FALSE(execute(a, Command::QueuePop, {"/q"}));
  EXPECT_TRUE(state.dropKeySpace("b"));
  EXPECT_EQ(state.budget().used(), 2 + kKey + 5);
  a.clearData();
  EXPECT_EQ(state.budget().used(), 0u);
}

}  // namespace
}  // namespace ddprun::rdzv

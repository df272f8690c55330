// Replays every captured PyTorch TCPStore conversation in
// tests/fixtures/tcpstore/ against a fresh ddprund and requires ddprund's
// replies to be byte-identical to the real server's, wherever the captured
// server was a compatible (same-version) one. The two cross-version captures
// recorded real servers failing; there ddprund must succeed instead. Where a
// capture holds only one rank's traffic, rank 0's part is done here by a
// second connection, at the point the capture shows it happened.
#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <set>
#include <string>

#include "ddprun/test_support/daemon_process.hpp"
#include "ddprun/test_support/fixture_log.hpp"
#include "ddprun/test_support/hex.hpp"
#include "fixture_replayer.hpp"
#include "wire_client.hpp"

namespace ddprun::wire_test {
namespace {

using namespace std::string_literals;
using test_support::DaemonProcess;

// Every capture this suite knows how to replay. A new capture must get a
// test here; EveryCaptureIsReplayed fails until it does.
const std::set<std::string> kReplayedCaptures = {
    "torch113-client-all-ops.jsonl",
    "torch113-client-to-torch26-server.jsonl",
    "torch113-init-process-group-agent-store.jsonl",
    "torch113-init-process-group-gloo.jsonl",
    "torch113-torchrun-c10d-rendezvous.jsonl",
    "torch26-client-all-ops.jsonl",
    "torch26-client-to-torch113-server.jsonl",
    "torch26-init-process-group-gloo.jsonl",
};

class FixtureReplayTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const auto problem = test_support::fixturesProblem()) {
      FAIL() << *problem;
    }
    daemon_.emplace();
  }

  static test_support::FixtureLog load(const std::string& name) {
    return test_support::FixtureLog::load(test_support::fixturesDir() / name);
  }
  std::uint16_t port() const { return daemon_->port(); }

  std::optional<DaemonProcess> daemon_;
};

// The value a captured GET reply carried (u64 length + bytes, in one chunk).
// Rank 0's published values exist in a single-rank capture only as rank 1's
// GET replies, so an injected value and the reply it is compared with come
// from the same record: the replay then checks that opaque bytes round-trip
// exactly and that each WAIT is released at the right moment.
std::string recordedValue(const test_support::FixtureLog& log, int line) {
  const test_support::Record& reply = log.atLine(line);
  std::string value = reply.bytes.size() >= 8 ? reply.bytes.substr(8) : std::string();
  EXPECT_EQ(reply.dir, test_support::Direction::ServerToClient) << log.name() << ":" << line;
  EXPECT_EQ(bytesReply(value), reply.bytes)
      << log.name() << ":" << line << " is not one whole GET reply";
  return value;
}

// Hook for the moment the capture's client sat in a WAIT on `key` that rank
// 0 (absent from the capture) satisfied: first proves the WAIT is really
// pending (no reply yet), then SETs the key as rank 0 did.
FixtureReplayer::Hook setWhileWaiting(FixtureReplayer& replayer,
                                      const test_support::FixtureLog& log, int line,
                                      WireClient& rank0, std::string key, std::string value) {
  return [&replayer, &log, &rank0, line, key = std::move(key), value = std::move(value)] {
    const test_support::Record& wait = log.atLine(line);
    ASSERT_NE(wait.bytes.find(key), std::string::npos)
        << log.name() << ":" << line << " should hold the WAIT on " << key;
    RawConnection& waiter = replayer.connection(wait.conn);
    EXPECT_FALSE(waiter.bytesAvailableWithin(kQuietWindow))
        << "the WAIT on " << key << " was answered (" << test_support::toHex(waiter.buffered())
        << ") before anyone set the key";
    rank0.set(key, value);
  };
}

// Hook for rank 0's ADD on a counter; `expected` is what rank 0 must get,
// which pins where in rank 1's sequence the capture shows it happened.
FixtureReplayer::Hook addAsRankZero(WireClient& rank0, std::string key, std::int64_t expected) {
  return [&rank0, key = std::move(key), expected] {
    EXPECT_EQ(rank0.add(key, 1), expected) << "rank 0's ADD " << key;
  };
}

TEST_F(FixtureReplayTest, EveryCaptureIsReplayed) {
  std::set<std::string> found;
  for (const auto& entry : std::filesystem::directory_iterator(test_support::fixturesDir())) {
    if (entry.path().extension() == ".jsonl") {
      found.insert(entry.path().filename().string());
    }
  }
  for (const std::string& name : found) {
    EXPECT_TRUE(kReplayedCaptures.contains(name)) << name << " has no replay test";
  }
  for (const std::string& name : kReplayedCaptures) {
    EXPECT_TRUE(found.contains(name))
        << name << " is missing from " << test_support::fixturesDir().string();
  }
}

// 2.6 client -> 2.6 server, every operation including CANCEL_WAIT after a
// client-side wait timeout (lines 32-34).
TEST_F(FixtureReplayTest, Torch26ClientAllOps) {
  const test_support::FixtureLog log = load("torch26-client-all-ops.jsonl");
  FixtureReplayer replayer(log, port());
  EXPECT_TRUE(replayer.replayAll());
}

// 1.13 torchrun agent's c10d rendezvous: COMPARE_SET state machine, SET,
// WAIT+GET; lone type bytes (lines 9, 14, 21-26) and merged requests.
TEST_F(FixtureReplayTest, Torch113TorchrunC10dRendezvous) {
  const test_support::FixtureLog log = load("torch113-torchrun-c10d-rendezvous.jsonl");
  FixtureReplayer replayer(log, port());
  EXPECT_TRUE(replayer.replayAll());
}

// Two 1.13 ranks, both plain clients (4 connections, interleaved): replayed
// in record order, so each WAIT is released by the other rank's SET exactly
// as captured. Nothing is missing from this capture. Twice both ranks' barrier
// ADD +1 were in flight together, and which one ran first shows only in the
// replies: rank 1 (conn1) got 1 both times (lines 29 and 60), although at
// lines 58-59 rank 0's request was read first. Those requests are ordered
// here so that ddprund, too, runs rank 1's first.
TEST_F(FixtureReplayTest, Torch113InitProcessGroupAgentStore) {
  const test_support::FixtureLog log = load("torch113-init-process-group-agent-store.jsonl");
  FixtureReplayer replayer(log, port());
  replayer.moveBefore(29, 28);  // conn1's reply 1 before conn3's ADD is sent
  replayer.moveBefore(59, 58);  // conn1's ADD ...
  replayer.moveBefore(60, 58);  // ... and its reply 1 before conn3's ADD
  EXPECT_TRUE(replayer.replayAll());
}

// Rank 1 of a 1.13 gloo init_process_group. Rank 0 hosted the real server,
// so its own store traffic never crossed the relay; a second connection does
// it here at the points rank 1's replies show it happened: its `init/` ADD
// (rank 1 got 2), its SETs that released rank 1's WAITs, and its barrier
// ADDs (rank 1's polled ADD 0 went 1 -> 1 -> 2 at lines 17-22; rank 1's
// ADD +1 for the second barrier already returned 2 at line 43).
TEST_F(FixtureReplayTest, Torch113InitProcessGroupGloo) {
  const test_support::FixtureLog log = load("torch113-init-process-group-gloo.jsonl");
  FixtureReplayer replayer(log, port());
  WireClient rank0(port(), Dialect::Legacy113);
  replayer.after(1, addAsRankZero(rank0, "init/", 1));
  replayer.after(
      5, setWhileWaiting(replayer, log, 5, rank0, "/default_pg/0/0/rank_0", recordedValue(log, 8)));
  replayer.after(
      10, setWhileWaiting(replayer, log, 10, rank0, "/default_pg/0/0/0", recordedValue(log, 15)));
  replayer.after(20, addAsRankZero(rank0, "/default_pg/store_based_barrier_key:1", 2));
  replayer.after(24, setWhileWaiting(replayer, log, 24, rank0, "/default_pg/0/SEQ_NUM_STORE_KEY",
                                     recordedValue(log, 29)));
  replayer.after(30, setWhileWaiting(replayer, log, 30, rank0, "/default_pg/1/0/rank_0",
                                     recordedValue(log, 34)));
  replayer.after(
      36, setWhileWaiting(replayer, log, 36, rank0, "/default_pg/1/0/0", recordedValue(log, 41)));
  replayer.after(41, addAsRankZero(rank0, "/default_pg/store_based_barrier_key:2", 1));
  replayer.after(47, setWhileWaiting(replayer, log, 47, rank0, "/default_pg/1/SEQ_NUM_STORE_KEY",
                                     recordedValue(log, 53)));
  EXPECT_TRUE(replayer.replayAll());
}

// Rank 1 of a 2.6 gloo init_process_group; rank 0 hosted the server, so as
// above a second (2.6-dialect) connection does rank 0's `init/` ADD and
// publishes rank 0's gloo address records (opaque bytes, as captured).
TEST_F(FixtureReplayTest, Torch26InitProcessGroupGloo) {
  const test_support::FixtureLog log = load("torch26-init-process-group-gloo.jsonl");
  FixtureReplayer replayer(log, port());
  WireClient rank0(port(), Dialect::Modern);
  replayer.after(3, addAsRankZero(rank0, "init/", 1));
  replayer.after(6, setWhileWaiting(replayer, log, 6, rank0, "/default_pg/0//cpu//0/0",
                                    recordedValue(log, 11)));
  replayer.after(12, setWhileWaiting(replayer, log, 12, rank0, "/default_pg/0//1//cpu//0/0",
                                     recordedValue(log, 17)));
  EXPECT_TRUE(replayer.replayAll());
}

// 1.13 client -> 1.13 server, every operation. The real server desynced
// this client (lines 36-40): the client gave up on WAIT ["/missing"] after
// 1 s without telling the server, a second client later SET "/missing", the
// server's stale STOP_WAITING (line 37) was read as the first byte of the
// next ADD's reply (-512 instead of -2), and the leftover byte broke the
// GET after it. ddprund cancels a legacy connection's pending WAIT when the
// next request arrives, so: the ADD must get exactly -2, and the late SET
// must not produce a byte on this connection.
//
// The late SET is sent after the ADD. In the capture it came before the ADD
// (2.2 s after the WAIT); that order cannot be fixed by any server, since
// the server cannot know the client stopped waiting, and ddprund rightly
// sends STOP_WAITING then. What ddprund fixes is a key that appears after
// the client has moved on, which is the case reproduced here.
TEST_F(FixtureReplayTest, Torch113ClientAllOpsDoesNotDesync) {
  const test_support::FixtureLog log = load("torch113-client-all-ops.jsonl");
  ASSERT_NE(log.atLine(36).bytes.find("/missing"), std::string::npos);
  ASSERT_EQ(log.atLine(37).bytes, "\0"s) << "line 37 should be the stray STOP_WAITING";
  ASSERT_EQ(log.atLine(39).bytes, i64Reply(-2)) << "line 39 should be ADD's -2";

  FixtureReplayer replayer(log, port());
  ASSERT_TRUE(replayer.replayThrough(36));  // ... then WAIT ["/missing"]; the client times out
  replayer.skipThrough(37);                 // the real server's stray byte: must not exist
  // Line 38's ADD: the replayer first requires silence on the pending WAIT,
  // then line 39 requires exactly -2, with no STOP_WAITING in front.
  ASSERT_TRUE(replayer.replayThrough(39));

  WireClient other(port(), Dialect::Legacy113);
  other.set("/missing", "now-set");
  // Once the other client reads the key back, its SET has been executed, so
  // a wake-up for the cancelled WAIT would already be on its way.
  ASSERT_EQ(other.get("/missing"), "now-set");
  RawConnection& client = replayer.connection(1);
  EXPECT_FALSE(client.bytesAvailableWithin(kQuietWindow))
      << "stray STOP_WAITING after the cancelled WAIT: " << test_support::toHex(client.buffered());

  // Line 40's WAIT ["/nokey"] must stay pending (no reply) until the client
  // closes at lines 43-44; the close check requires that nothing was sent.
  EXPECT_TRUE(replayer.replayAll());
}

// 2.6 client -> 1.13 server: each of the 6 connections is one connect
// attempt (VALIDATE + PING) that the 1.13 server dropped without a byte,
// so the capture has no server data at all. ddprund speaks 2.2+ and must
// echo each PING nonce; the first attempt would then have succeeded.
TEST_F(FixtureReplayTest, Torch26ClientSucceedsWhereTorch113ServerFailed) {
  const test_support::FixtureLog log = load("torch26-client-to-torch113-server.jsonl");
  ASSERT_EQ(log.connections().size(), 6u);
  for (int id : log.connections()) {
    SCOPED_TRACE("conn" + std::to_string(id));
    const std::string sent = log.stream(id, test_support::Direction::ClientToServer);
    ASSERT_EQ(sent.size(), 10u);
    ASSERT_EQ(sent.substr(0, 6), validateRequest() + "\x0d") << "expected VALIDATE + PING";
    ASSERT_EQ(log.stream(id, test_support::Direction::ServerToClient), "")
        << "the 1.13 server never replied";

    RawConnection conn(port());
    for (const test_support::Record& record : log.records()) {
      if (record.conn == id && record.dir == test_support::Direction::ClientToServer &&
          !record.endOfStream()) {
        ASSERT_TRUE(conn.sendAll(record.bytes));
      }
    }
    EXPECT_EQ(conn.recvExact(4, kReplyTimeout), sent.substr(6, 4)) << "PING nonce echo";
    conn.shutdownWrite();
    EXPECT_TRUE(conn.waitForClose(kReplyTimeout));
    EXPECT_EQ(test_support::toHex(conn.buffered()), "");
  }
}

// 1.13 client -> 2.6 server: SET "/a"="b" and the WAIT of get("/a") came in
// one chunk; the 2.6 server closed the connection because the first command
// was not VALIDATE. ddprund detects the 1.13 dialect: the WAIT gets
// STOP_WAITING, the GET that follows gets "b", and the idle callback
// connection (conn2) stays open.
TEST_F(FixtureReplayTest, Torch113ClientSucceedsWhereTorch26ServerFailed) {
  const test_support::FixtureLog log = load("torch113-client-to-torch26-server.jsonl");
  const std::string expected_sent = encode(Dialect::Legacy113, Command::Set, {"/a"}, {"b"}) +
                                    encode(Dialect::Legacy113, Command::Wait, {"/a"});
  ASSERT_EQ(test_support::toHex(log.atLine(2).bytes), test_support::toHex(expected_sent));

  FixtureReplayer replayer(log, port());
  replayer.after(2, [&] {
    RawConnection& main = replayer.connection(1);
    EXPECT_EQ(main.recvExact(1, kReplyTimeout), u8Reply(0)) << "STOP_WAITING for WAIT [/a]";
    main.sendAll(encode(Dialect::Legacy113, Command::Get, {"/a"}));
    EXPECT_EQ(main.recvExact(9, kReplyTimeout), bytesReply("b"));
  });
  replayer.after(3, [&] {
    EXPECT_FALSE(replayer.connection(2).waitForClose(kQuietWindow))
        << "the idle callback connection was closed";
  });
  EXPECT_TRUE(replayer.replayAll());
}

}  // namespace
}  // namespace ddprun::wire_test

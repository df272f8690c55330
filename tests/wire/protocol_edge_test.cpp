// Well-formed but awkward client behaviour that must simply work: VALIDATE
// split across writes, many requests in one write, and the CANCEL_WAIT
// orderings 2.1+ clients rely on after a client-side wait timeout.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cstring>
#include <optional>
#include <string>

#include "ddprun/test_support/daemon_process.hpp"
#include "ddprun/test_support/hex.hpp"
#include "wire_client.hpp"

namespace ddprun::wire_test {
namespace {

using test_support::DaemonProcess;

class ProtocolEdgeTest : public ::testing::Test {
 protected:
  std::uint16_t port() const { return daemon_.port(); }

  // Sends `requests` in one write and requires exactly `replies` back, and
  // nothing more.
  static void expectReplies(RawConnection& conn, const std::string& requests,
                            const std::string& replies) {
    ASSERT_TRUE(conn.sendAll(requests));
    const auto got = conn.recvExact(replies.size(), kReplyTimeout);
    ASSERT_TRUE(got.has_value()) << "got only " << test_support::toHex(conn.buffered())
                                 << (conn.peerClosed() ? " (closed)" : "");
    EXPECT_EQ(test_support::toHex(*got), test_support::toHex(replies));
    EXPECT_FALSE(conn.bytesAvailableWithin(kQuietWindow))
        << "extra: " << test_support::toHex(conn.buffered());
  }

  DaemonProcess daemon_;
};

class SplitValidateTest : public ProtocolEdgeTest,
                          public ::testing::WithParamInterface<std::size_t> {};

// The 5-byte VALIDATE cut after 1..4 bytes: the dialect cannot be decided
// before byte 5, and the decision must not be made early (PyTorch's libuv
// server closes the connection in this case; see docs/tcpstore-protocol.md §4.4).
TEST_P(SplitValidateTest, ValidateSplitAcrossTwoWritesStillWorks) {
  RawConnection conn(port());
  const std::string validate = validateRequest();
  ASSERT_TRUE(conn.sendAll(validate.substr(0, GetParam())));
  EXPECT_FALSE(conn.bytesAvailableWithin(kQuietWindow)) << test_support::toHex(conn.buffered());
  ASSERT_TRUE(conn.sendAll(validate.substr(GetParam()) + pingRequest(0x4f6b)));
  EXPECT_EQ(conn.recvExact(4, kReplyTimeout), u32Reply(0x4f6b)) << "PING echo";
  // The connection speaks 2.2+ numbering from here on: 01 is SET, 04 ADD.
  expectReplies(conn,
                encode(Dialect::Modern, Command::Set, {"/k"}, {"v"}) +
                    encode(Dialect::Modern, Command::Add, {"/n"}, {}, 3),
                i64Reply(3));
}

INSTANTIATE_TEST_SUITE_P(EverySplitPoint, SplitValidateTest, ::testing::Values(1, 2, 3, 4));

TEST_F(ProtocolEdgeTest, ManyRequestsInOneWrite) {
  RawConnection conn(port());
  const Dialect d = Dialect::Modern;
  const std::string requests =
      validateRequest() + pingRequest(0x01020304) + encode(d, Command::Set, {"/a"}, {"1"}) +
      encode(d, Command::Set, {"/b"}, {"22"}) + encode(d, Command::Add, {"/c"}, {}, 5) +
      encode(d, Command::Add, {"/c"}, {}, -7) + encode(d, Command::Check, {"/a", "/b"}) +
      encode(d, Command::Check, {"/a", "/zz"}) + encode(d, Command::Wait, {"/a", "/b"}) +
      encode(d, Command::Get, {"/a"}) + encode(d, Command::Append, {"/d"}, {"x"}) +
      encode(d, Command::Append, {"/d"}, {"yz"}) +
      encode(d, Command::MultiSet, {"/m1", "/m2"}, {"p", "qq"}) +
      encode(d, Command::MultiGet, {"/b", "/c", "/d", "/m2"}) +
      encode(d, Command::CompareSet, {"/e"}, {"", "new"}) +
      encode(d, Command::CompareSet, {"/e"}, {"wrong", "z"}) + encode(d, Command::GetNumKeys) +
      encode(d, Command::DeleteKey, {"/b"}) + encode(d, Command::DeleteKey, {"/b"}) +
      encode(d, Command::CancelWait);
  const std::string replies =
      u32Reply(0x01020304) + i64Reply(5) + i64Reply(-2) + u8Reply(0) + u8Reply(1) + u8Reply(0) +
      bytesReply("1") + bytesReply("22") + bytesReply("-2") + bytesReply("xyz") + bytesReply("qq") +
      bytesReply("new") + bytesReply("new") + i64Reply(7) /* a b c d m1 m2 e */ + i64Reply(1) +
      i64Reply(0) + u8Reply(1);
  expectReplies(conn, requests, replies);
}

// A 1.13 client never pipelines, but ddprund must not care: 1000 ADDs in
// one write come back as 1..1000, in order.
TEST_F(ProtocolEdgeTest, ThousandLegacyAddsInOneWrite) {
  RawConnection conn(port());
  std::string requests;
  std::string replies;
  for (int i = 1; i <= 1000; ++i) {
    requests += encode(Dialect::Legacy113, Command::Add, {"/counter"}, {}, 1);
    replies += i64Reply(i);
  }
  expectReplies(conn, requests, replies);
}

TEST_F(ProtocolEdgeTest, WaitThenCancelWaitGetsExactlyWaitCanceled) {
  WireClient waiter(port(), Dialect::Modern);
  ASSERT_TRUE(waiter.raw().sendAll(encode(Dialect::Modern, Command::Wait, {"/never"})));
  EXPECT_FALSE(waiter.raw().bytesAvailableWithin(kQuietWindow)) << "WAIT on a missing key returned";
  expectReplies(waiter.raw(), encode(Dialect::Modern, Command::CancelWait), u8Reply(1));

  // The registration is gone: setting the key now must not reach the waiter.
  WireClient setter(port(), Dialect::Modern);
  setter.set("/never", "late");
  ASSERT_EQ(setter.get("/never"), "late");
  EXPECT_FALSE(waiter.raw().bytesAvailableWithin(kQuietWindow))
      << "stray STOP_WAITING after CANCEL_WAIT: " << test_support::toHex(waiter.raw().buffered());
  EXPECT_TRUE(waiter.roundTrip());
}

// The SET wakes the WAIT before the client's CANCEL_WAIT arrives (the
// client's local timeout raced the key's arrival): the client reads
// STOP_WAITING, then must still read WAIT_CANCELED, in that order.
TEST_F(ProtocolEdgeTest, CancelWaitAfterASetWokeTheWaitGetsStopWaitingThenWaitCanceled) {
  WireClient waiter(port(), Dialect::Modern);
  ASSERT_TRUE(waiter.raw().sendAll(encode(Dialect::Modern, Command::Wait, {"/racy"})));
  EXPECT_FALSE(waiter.raw().bytesAvailableWithin(kQuietWindow));

  WireClient setter(port(), Dialect::Modern);
  setter.set("/racy", "v");
  // The setter reading the key back orders its SET before the CANCEL_WAIT
  // below; the waiter's STOP_WAITING is not read first, as in the race.
  ASSERT_EQ(setter.get("/racy"), "v");
  ASSERT_TRUE(waiter.raw().sendAll(encode(Dialect::Modern, Command::CancelWait)));
  const auto got = waiter.raw().recvExact(2, kReplyTimeout);
  EXPECT_EQ(test_support::toHex(got.value_or(waiter.raw().buffered())), "0001");
  EXPECT_FALSE(waiter.raw().bytesAvailableWithin(kQuietWindow))
      << test_support::toHex(waiter.raw().buffered());
  EXPECT_TRUE(waiter.roundTrip());
}

// A 1.13 client gives up a WAIT without telling the server; its next
// request cancels it, whoever answers that request. A query GET is answered
// by the rendezvous, not the store, and must cancel it too: otherwise the
// key's later arrival sends a STOP_WAITING nobody asked for.
TEST_F(ProtocolEdgeTest, ALegacyQueryGetCancelsTheClientsStaleWait) {
  WireClient waiter(port(), Dialect::Legacy113);
  ASSERT_TRUE(waiter.raw().sendAll(encode(Dialect::Legacy113, Command::Wait, {"/stale"})));
  EXPECT_FALSE(waiter.raw().bytesAvailableWithin(kQuietWindow)) << "WAIT on a missing key returned";
  ASSERT_TRUE(
      waiter.raw().sendAll(encode(Dialect::Legacy113, Command::Get, {"ddprun/query/clock"})));
  const auto length = waiter.raw().recvExact(8, kReplyTimeout);
  ASSERT_TRUE(length.has_value()) << test_support::toHex(waiter.raw().buffered());
  std::uint64_t answer_size = 0;
  std::memcpy(&answer_size, length->data(), sizeof answer_size);
  const auto answer = waiter.raw().recvExact(answer_size, kReplyTimeout);
  ASSERT_TRUE(answer.has_value());
  EXPECT_NE(answer->find("steady_ns"), std::string::npos) << *answer;

  WireClient setter(port(), Dialect::Modern);
  setter.set("/stale", "now");
  ASSERT_EQ(setter.get("/stale"), "now");
  EXPECT_FALSE(waiter.raw().bytesAvailableWithin(kQuietWindow))
      << "stray bytes after the query: " << test_support::toHex(waiter.raw().buffered());
  EXPECT_TRUE(waiter.roundTrip());
}

TEST_F(ProtocolEdgeTest, CancelWaitWithNothingPendingStillGetsWaitCanceled) {
  WireClient client(port(), Dialect::Modern);
  expectReplies(client.raw(), encode(Dialect::Modern, Command::CancelWait), u8Reply(1));
  EXPECT_TRUE(client.roundTrip());
}

// The rest of a request cut short, and the next request, all queued in the
// daemon's socket before it reads again (it is stopped meanwhile), the
// client then only waiting for the reply. The daemon reads an incomplete
// request's rest into a buffer sized to what is missing, so one read leaves
// bytes behind, and no new bytes will arrive to wake it: its next readiness
// wait must see those already queued. (Asio registers sockets
// edge-triggered; its wait re-arms the registration, which reports them.)
TEST_F(ProtocolEdgeTest, BytesQueuedPastAnIncompleteRequestAreAllRead) {
  RawConnection conn(port());
  const std::string set =
      encode(Dialect::Modern, Command::Set, {"/queued"}, {std::string(1000, 'v')});
  const std::string add = encode(Dialect::Modern, Command::Add, {"/queued-count"}, {}, 1);
  ASSERT_TRUE(conn.sendAll(validateRequest() + set.substr(0, 20)));
  ASSERT_TRUE(WireClient(port(), Dialect::Modern).roundTrip());  // it has read those 20
  ASSERT_EQ(::kill(daemon_.pid(), SIGSTOP), 0);
  ASSERT_TRUE(conn.sendAll(set.substr(20) + add));  // about 1 KiB: the kernel queues it all
  ASSERT_EQ(::kill(daemon_.pid(), SIGCONT), 0);
  const auto got = conn.recvExact(8, kReplyTimeout);
  ASSERT_TRUE(got.has_value()) << "no reply to the ADD behind the incomplete SET"
                               << (conn.peerClosed() ? " (closed)" : "");
  EXPECT_EQ(*got, i64Reply(1));
}

}  // namespace
}  // namespace ddprun::wire_test

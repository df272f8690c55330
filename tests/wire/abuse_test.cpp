// Misbehaving raw-socket clients: each must get its own connection closed,
// with a warning on ddprund's stderr naming the client's address and the
// reason, while a well-behaved client connected beforehand keeps being
// served.
#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "daemon_log.hpp"
#include "ddprun/test_support/daemon_process.hpp"
#include "ddprun/test_support/eventually.hpp"
#include "ddprun/test_support/hex.hpp"
#include "wire_client.hpp"

namespace ddprun::wire_test {
namespace {

using namespace std::chrono_literals;
using test_support::DaemonProcess;
using test_support::eventually;

constexpr std::chrono::milliseconds kCloseTimeout = 5s;

std::string u64Bytes(std::uint64_t value) {
  std::string out;
  proto::WireWriter(out).u64(value);
  return out;
}

class AbuseTest : public ::testing::Test {
 protected:
  void SetUp() override { start({}); }

  // Restarts ddprund with `args`, and connects the bystander: a 1.13 client
  // that proves it is served before the abuse starts.
  void start(std::vector<std::string> args) {
    bystander_.reset();
    daemon_.reset();
    daemon_.emplace(std::move(args));
    bystander_.emplace(port(), Dialect::Legacy113);
    ASSERT_TRUE(bystander_->roundTrip());
  }

  std::uint16_t port() const { return daemon_->port(); }

  // A 2.2+ connection past VALIDATE and PING, so that what the test sends
  // next is all that can be wrong with it.
  RawConnection handshaken() {
    RawConnection conn(port());
    conn.sendAll(validateRequest() + pingRequest(7));
    EXPECT_EQ(conn.recvExact(4, kReplyTimeout), u32Reply(7)) << "PING echo";
    return conn;
  }

  // The abuser's connection is closed, a warning names its address and
  // mentions one of `reason_words`, and the bystander is still served.
  void expectClosedAndLogged(RawConnection& abuser,
                             std::initializer_list<std::string_view> reason_words) {
    EXPECT_TRUE(abuser.waitForClose(kCloseTimeout))
        << "ddprund kept the abusive connection " << abuser.localAddress() << " open";
    std::optional<std::string> warning;
    eventually(
        [&] {
          warning = warningAboutPeer(daemon_->stderrText(), abuser.localPort());
          return warning.has_value();
        },
        kCloseTimeout);
    if (warning) {
      EXPECT_TRUE(mentionsAny(*warning, reason_words))
          << "the warning does not say why: " << *warning;
    } else {
      ADD_FAILURE() << "no warning naming " << abuser.localAddress() << " in stderr:\n"
                    << daemon_->stderrText();
    }
    EXPECT_TRUE(bystander_->roundTrip()) << "the well-behaved client was not served";
  }

  std::optional<DaemonProcess> daemon_;
  std::optional<WireClient> bystander_;
};

TEST_F(AbuseTest, UnknownCommandByteOnLegacyConnection) {
  RawConnection abuser(port());
  abuser.sendAll("\x2a");  // 42: no command in any dialect
  expectClosedAndLogged(abuser, {"unknown command"});
}

TEST_F(AbuseTest, UnknownCommandByteAfterValidate) {
  RawConnection abuser = handshaken();
  abuser.sendAll("\x7f");
  expectClosedAndLogged(abuser, {"unknown command"});
}

// PyTorch's servers answer each request before reading the next, so a
// client whose bad request follows good ones in the same write still gets
// the good ones' replies before the close.
TEST_F(AbuseTest, RepliesToRequestsBeforeABadOneAreDelivered) {
  RawConnection abuser(port());
  abuser.sendAll(validateRequest() + pingRequest(7) +
                 encode(Dialect::Modern, Command::Add, {"/n"}, {}, 5) + "\x7f");
  EXPECT_EQ(test_support::toHex(abuser.recvExact(12, kReplyTimeout).value_or(abuser.buffered())),
            test_support::toHex(u32Reply(7) + i64Reply(5)));
  expectClosedAndLogged(abuser, {"unknown command"});
}

TEST_F(AbuseTest, KeyLengthOfTwoToThe63) {
  RawConnection abuser(port());
  abuser.sendAll(std::string(1, '\0') + u64Bytes(std::uint64_t{1} << 63));  // 1.13 SET
  expectClosedAndLogged(abuser, {"key"});
}

TEST_F(AbuseTest, KeyLengthOfTwoToThe63AfterValidate) {
  RawConnection abuser = handshaken();
  abuser.sendAll("\x01" + u64Bytes(std::uint64_t{1} << 63));  // 2.2+ SET
  expectClosedAndLogged(abuser, {"key"});
}

TEST_F(AbuseTest, ValueOverTheDefaultLimit) {
  RawConnection abuser(port());
  abuser.sendAll(std::string(1, '\0') + u64Bytes(4) + "/big" + u64Bytes(8 * 1024 * 1024 + 1));
  expectClosedAndLogged(abuser, {"value"});
}

TEST_F(AbuseTest, KeyCountOverTheDefaultLimit) {
  RawConnection abuser(port());
  abuser.sendAll("\x05" + u64Bytes(128 * 1024 + 1));  // 1.13 WAIT
  expectClosedAndLogged(abuser, {"keys"});
}

TEST_F(AbuseTest, KeyOverTheConfiguredLimit) {
  ASSERT_NO_FATAL_FAILURE(start({"--max-key-bytes", "16"}));
  bystander_->set("/sixteen-bytes-k", "fits");  // exactly at the limit
  EXPECT_EQ(bystander_->get("/sixteen-bytes-k"), "fits");
  RawConnection abuser(port());
  abuser.sendAll(encode(Dialect::Legacy113, Command::Set, {"/seventeen-bytes-"}, {"x"}));
  expectClosedAndLogged(abuser, {"key"});
}

TEST_F(AbuseTest, RequestOverTheConfiguredLimit) {
  ASSERT_NO_FATAL_FAILURE(start({"--max-request-bytes", "4096"}));
  const std::string half(3000, 'v');
  RawConnection abuser = handshaken();
  abuser.sendAll(encode(Dialect::Modern, Command::MultiSet, {"/a", "/b"}, {half, half}));
  expectClosedAndLogged(abuser, {"request"});
}

// The client dies mid-request: half a SET, then end of stream.
TEST_F(AbuseTest, TruncatedRequestThenEndOfStream) {
  RawConnection abuser(port());
  const std::string set = encode(Dialect::Legacy113, Command::Set, {"/ab"}, {"value"});
  abuser.sendAll(set.substr(0, set.size() - 9));  // cut inside the value's length
  abuser.shutdownWrite();
  expectClosedAndLogged(abuser, {"incomplete", "truncated", "partial", "mid-request", "middle",
                                 "end of stream", "eof"});
}

// `00 de ad be ef`: looks like the start of VALIDATE, is not. ddprund reads
// it as a 1.13 SET whose key length is absurd.
TEST_F(AbuseTest, GarbageInsteadOfValidate) {
  RawConnection abuser(port());
  abuser.sendAll(test_support::fromHex("00deadbeefffffffff0102030405060708"));
  expectClosedAndLogged(abuser, {"key", "validate", "magic"});
}

// A 2.6-style handshake with one magic byte wrong: no longer a VALIDATE, so
// a 1.13 SET whose key length (bytes ce f7 85 3d 0d 07 00 00) is ~7.7e12.
TEST_F(AbuseTest, WrongValidateMagic) {
  RawConnection abuser(port());
  abuser.sendAll(test_support::fromHex("00cef7853d") + pingRequest(7));
  expectClosedAndLogged(abuser, {"key", "validate", "magic"});
}

TEST_F(AbuseTest, WrongMagicInALaterValidate) {
  RawConnection abuser = handshaken();
  abuser.sendAll(test_support::fromHex("0011223344"));
  expectClosedAndLogged(abuser, {"validate", "magic"});
}

TEST_F(AbuseTest, SecondValidate) {
  RawConnection abuser = handshaken();
  abuser.sendAll(validateRequest());
  expectClosedAndLogged(abuser, {"validate"});
}

// The warning quotes what the client sent (here a key) by ddprun's rule for
// text from outside: no escape sequence reaches whoever reads the log on a
// terminal, and no line break forges a line of ddprund's.
TEST_F(AbuseTest, WhatTheClientSentIsQuotedEscapedInTheWarning) {
  RawConnection abuser = handshaken();
  abuser.sendAll(encode(Dialect::Modern, Command::Set,
                        {"ddprun/rdzv/\x1b]0;owned\x07\r\n[ddprund] forged\xe2\x80\xae"}, {"v"}));
  expectClosedAndLogged(abuser, {"malformed rendezvous key"});
  const std::string log = daemon_->stderrText();
  EXPECT_NE(log.find(R"('ddprun/rdzv/\x1b]0;owned\x07\x0d\x0a[ddprund] forged\u202e')"),
            std::string::npos)
      << log;
  for (const char c : log) {
    const auto byte = static_cast<unsigned char>(c);
    ASSERT_FALSE((byte < 0x20 && c != '\n') || byte == 0x7f) << "byte " << int{byte} << "\n" << log;
  }
  EXPECT_EQ(log.find("\n[ddprund] forged"), std::string::npos) << log;
}

// A peer that trickles one byte per second never completes its request; with
// --request-timeout 2 it must be cut off about 2 s after its first byte,
// while the bystander, idle all along, must not be (idle is not incomplete).
TEST_F(AbuseTest, OneBytePerSecondPeerIsClosedAfterTheRequestTimeout) {
  ASSERT_NO_FATAL_FAILURE(start({"--request-timeout", "2"}));
  RawConnection abuser(port());
  const std::string request = encode(Dialect::Legacy113, Command::Set, {"/slow"}, {"loris"});
  const auto started = std::chrono::steady_clock::now();
  bool closed = false;
  for (std::size_t i = 0; i < request.size() && !closed; ++i) {
    abuser.sendAll(request.substr(i, 1));
    closed = abuser.waitForClose(1s);  // also the pacing: one byte per second
  }
  const auto elapsed = std::chrono::steady_clock::now() - started;
  ASSERT_TRUE(closed) << "still open after " << request.size() << " s of trickling";
  EXPECT_GE(elapsed, 1500ms) << "closed long before the 2 s request timeout";
  EXPECT_LE(elapsed, 6s) << "closed long after the 2 s request timeout";
  expectClosedAndLogged(abuser, {"incomplete", "timeout", "timed out"});
}

}  // namespace
}  // namespace ddprun::wire_test

// WireClient owns one RawConnection that behaves like a well-mannered
// TCPStore client of one dialect: it encodes requests with ddprun::proto
// (the same tables the server decodes with) and reads each reply fully
// before the next request, as PyTorch's clients do. Tests use it for the
// "bystander" connection that must keep being served, for injecting keys a
// capture lacks, and for checking state. One test thread.
//
// The free functions build exact request and reply bytes for tests that
// write to RawConnection directly.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ddprun/proto/tcpstore_codec.hpp"
#include "ddprun/test_support/raw_connection.hpp"

namespace ddprun::wire_test {

using proto::Command;
using proto::Dialect;
using test_support::RawConnection;

// How long any single expected reply may take. Replies come in well under a
// millisecond; this only bounds how long a broken server stalls the suite.
inline constexpr std::chrono::milliseconds kReplyTimeout{5000};

// How long a test watches for bytes that must NOT come (a reply to a partial
// request, a stray STOP_WAITING). Absence cannot be proven by waiting; this
// window is long enough for the server to have handled what we sent, and a
// late stray byte still breaks the byte-exact comparison of a later reply.
inline constexpr std::chrono::milliseconds kQuietWindow{25};

std::string encode(Dialect dialect, Command command, std::vector<std::string_view> keys = {},
                   std::vector<std::string_view> values = {}, std::int64_t number = 0,
                   std::uint32_t word = 0);
std::string validateRequest();  // 00 ce f7 85 3c
std::string pingRequest(std::uint32_t nonce);

std::string u8Reply(std::uint8_t value);
std::string i64Reply(std::int64_t value);
std::string u32Reply(std::uint32_t value);
std::string bytesReply(std::string_view value);

class WireClient {
 public:
  // Connects; a Modern client sends VALIDATE at once (it has no reply).
  WireClient(std::uint16_t port, Dialect dialect);

  void set(std::string_view key, std::string_view value);
  std::optional<std::int64_t> add(std::string_view key, std::int64_t delta);
  // WAIT [key] then GET, as every PyTorch client does: blocks until the key
  // exists (up to kReplyTimeout).
  std::optional<std::string> get(std::string_view key);

  // SET a key unique to this call and read it back: the connection is alive
  // and served.
  ::testing::AssertionResult roundTrip();

  RawConnection& raw() { return conn_; }
  Dialect dialect() const { return dialect_; }

 private:
  std::optional<std::string> readBytesReply();

  RawConnection conn_;
  Dialect dialect_;
  int round_trips_ = 0;
};

}  // namespace ddprun::wire_test

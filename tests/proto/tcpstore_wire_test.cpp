// The wire vocabulary against the tables of docs/tcpstore-protocol.md §5, typed in
// here a second time so that a reordered or renumbered enum fails a test.
#include "ddprun/proto/tcpstore_wire.hpp"

#include <gtest/gtest.h>

#include <array>
#include <cstring>
#include <optional>
#include <string>

namespace ddprun::proto {
namespace {

constexpr int kAbsent = -1;

struct CommandRow {
  Command command;
  const char* name;
  int legacy113;  // column A: 1.13 and 2.0
  int legacy21;   // column C: 2.1
  int modern;     // columns D to G: 2.2+
};

// §5.1, one row per command, in the doc's order.
constexpr std::array<CommandRow, 19> kSection5 = {{
    {Command::Validate, "VALIDATE", kAbsent, kAbsent, 0},
    {Command::Set, "SET", 0, 0, 1},
    {Command::CompareSet, "COMPARE_SET", 1, 1, 2},
    {Command::Get, "GET", 2, 2, 3},
    {Command::Add, "ADD", 3, 3, 4},
    {Command::Check, "CHECK", 4, 4, 5},
    {Command::Wait, "WAIT", 5, 5, 6},
    {Command::GetNumKeys, "GETNUMKEYS", 6, 6, 7},
    {Command::WatchKey, "WATCH_KEY", 7, kAbsent, kAbsent},
    {Command::DeleteKey, "DELETE_KEY", 8, 7, 8},
    {Command::Append, "APPEND", kAbsent, 8, 9},
    {Command::MultiGet, "MULTI_GET", kAbsent, 9, 10},
    {Command::MultiSet, "MULTI_SET", kAbsent, 10, 11},
    {Command::CancelWait, "CANCEL_WAIT", kAbsent, 11, 12},
    {Command::Ping, "PING", kAbsent, kAbsent, 13},
    {Command::QueuePush, "QUEUE_PUSH", kAbsent, kAbsent, 14},
    {Command::QueuePop, "QUEUE_POP", kAbsent, kAbsent, 15},
    {Command::QueueLen, "QUEUE_LEN", kAbsent, kAbsent, 16},
    {Command::List, "LIST", kAbsent, kAbsent, 17},
}};

int columnOf(const CommandRow& row, Dialect dialect) {
  switch (dialect) {
    case Dialect::Legacy113:
      return row.legacy113;
    case Dialect::Legacy21:
      return row.legacy21;
    case Dialect::Modern:
      return row.modern;
    case Dialect::Undecided:
      break;
  }
  return kAbsent;
}

constexpr std::array<Dialect, 3> kDialects = {Dialect::Legacy113, Dialect::Legacy21,
                                              Dialect::Modern};

TEST(WireTable, WireByteMatchesSection5ForEveryCommandAndDialect) {
  for (const CommandRow& row : kSection5) {
    for (Dialect dialect : kDialects) {
      const int expected = columnOf(row, dialect);
      const std::optional<std::uint8_t> actual = wireByte(dialect, row.command);
      SCOPED_TRACE(std::string(row.name) + " in " + std::string(dialectName(dialect)));
      if (expected == kAbsent) {
        EXPECT_FALSE(actual.has_value()) << "byte " << int(actual.value_or(0));
      } else {
        ASSERT_TRUE(actual.has_value());
        EXPECT_EQ(*actual, expected);
      }
    }
  }
}

// The reverse direction over all 256 byte values: exactly the §5.1 bytes mean
// something, and each means its row's command.
TEST(WireTable, CommandFromWireMatchesSection5ForEveryByte) {
  for (Dialect dialect : kDialects) {
    for (int byte = 0; byte < 256; ++byte) {
      std::optional<Command> expected;
      for (const CommandRow& row : kSection5) {
        if (columnOf(row, dialect) == byte) {
          expected = row.command;
        }
      }
      SCOPED_TRACE("byte " + std::to_string(byte) + " in " + std::string(dialectName(dialect)));
      EXPECT_EQ(commandFromWire(dialect, static_cast<std::uint8_t>(byte)), expected);
    }
  }
}

TEST(WireTable, UndecidedDialectHasNoBytes) {
  for (const CommandRow& row : kSection5) {
    EXPECT_FALSE(wireByte(Dialect::Undecided, row.command).has_value()) << row.name;
  }
  for (int byte = 0; byte < 256; ++byte) {
    EXPECT_FALSE(commandFromWire(Dialect::Undecided, static_cast<std::uint8_t>(byte)));
  }
}

TEST(WireTable, CommandNamesAreTheDocsNames) {
  for (const CommandRow& row : kSection5) {
    EXPECT_EQ(commandName(row.command), row.name);
  }
}

// The per-dialect enums carry explicit values; each is checked against §5.1.
TEST(WireTable, Legacy113EnumMatchesColumnA) {
  EXPECT_EQ(static_cast<int>(Legacy113Byte::Set), 0);
  EXPECT_EQ(static_cast<int>(Legacy113Byte::CompareSet), 1);
  EXPECT_EQ(static_cast<int>(Legacy113Byte::Get), 2);
  EXPECT_EQ(static_cast<int>(Legacy113Byte::Add), 3);
  EXPECT_EQ(static_cast<int>(Legacy113Byte::Check), 4);
  EXPECT_EQ(static_cast<int>(Legacy113Byte::Wait), 5);
  EXPECT_EQ(static_cast<int>(Legacy113Byte::GetNumKeys), 6);
  EXPECT_EQ(static_cast<int>(Legacy113Byte::WatchKey), 7);
  EXPECT_EQ(static_cast<int>(Legacy113Byte::DeleteKey), 8);
}

TEST(WireTable, Legacy21EnumMatchesColumnC) {
  EXPECT_EQ(static_cast<int>(Legacy21Byte::Set), 0);
  EXPECT_EQ(static_cast<int>(Legacy21Byte::CompareSet), 1);
  EXPECT_EQ(static_cast<int>(Legacy21Byte::Get), 2);
  EXPECT_EQ(static_cast<int>(Legacy21Byte::Add), 3);
  EXPECT_EQ(static_cast<int>(Legacy21Byte::Check), 4);
  EXPECT_EQ(static_cast<int>(Legacy21Byte::Wait), 5);
  EXPECT_EQ(static_cast<int>(Legacy21Byte::GetNumKeys), 6);
  EXPECT_EQ(static_cast<int>(Legacy21Byte::DeleteKey), 7);
  EXPECT_EQ(static_cast<int>(Legacy21Byte::Append), 8);
  EXPECT_EQ(static_cast<int>(Legacy21Byte::MultiGet), 9);
  EXPECT_EQ(static_cast<int>(Legacy21Byte::MultiSet), 10);
  EXPECT_EQ(static_cast<int>(Legacy21Byte::CancelWait), 11);
}

TEST(WireTable, ModernEnumMatchesColumnsDToG) {
  EXPECT_EQ(static_cast<int>(ModernByte::Validate), 0);
  EXPECT_EQ(static_cast<int>(ModernByte::Set), 1);
  EXPECT_EQ(static_cast<int>(ModernByte::CompareSet), 2);
  EXPECT_EQ(static_cast<int>(ModernByte::Get), 3);
  EXPECT_EQ(static_cast<int>(ModernByte::Add), 4);
  EXPECT_EQ(static_cast<int>(ModernByte::Check), 5);
  EXPECT_EQ(static_cast<int>(ModernByte::Wait), 6);
  EXPECT_EQ(static_cast<int>(ModernByte::GetNumKeys), 7);
  EXPECT_EQ(static_cast<int>(ModernByte::DeleteKey), 8);
  EXPECT_EQ(static_cast<int>(ModernByte::Append), 9);
  EXPECT_EQ(static_cast<int>(ModernByte::MultiGet), 10);
  EXPECT_EQ(static_cast<int>(ModernByte::MultiSet), 11);
  EXPECT_EQ(static_cast<int>(ModernByte::CancelWait), 12);
  EXPECT_EQ(static_cast<int>(ModernByte::Ping), 13);
  EXPECT_EQ(static_cast<int>(ModernByte::QueuePush), 14);
  EXPECT_EQ(static_cast<int>(ModernByte::QueuePop), 15);
  EXPECT_EQ(static_cast<int>(ModernByte::QueueLen), 16);
  EXPECT_EQ(static_cast<int>(ModernByte::List), 17);
}

// §5.2: a single u8 each, unchanged in every version.
TEST(WireTable, ResponseEnumsMatchSection5_1) {
  EXPECT_EQ(static_cast<int>(CheckResponse::Ready), 0);
  EXPECT_EQ(static_cast<int>(CheckResponse::NotReady), 1);
  EXPECT_EQ(static_cast<int>(WaitResponse::StopWaiting), 0);
  EXPECT_EQ(static_cast<int>(WaitResponse::WaitCanceled), 1);
  EXPECT_EQ(static_cast<int>(WatchResponse::KeyUpdated), 0);
  EXPECT_EQ(static_cast<int>(WatchResponse::KeyCreated), 1);
  EXPECT_EQ(static_cast<int>(WatchResponse::KeyDeleted), 2);
  EXPECT_EQ(static_cast<int>(WatchResponse::KeyCallbackRegistered), 3);
}

// §4.3: the client sends the magic as the bytes CE F7 85 3C.
TEST(WireTable, ValidateMagicHasTheCapturedBytes) {
  std::array<unsigned char, 4> bytes{};
  std::memcpy(bytes.data(), &kValidateMagic, bytes.size());
  EXPECT_EQ(bytes, (std::array<unsigned char, 4>{0xCE, 0xF7, 0x85, 0x3C}));
}

// §7.18: the libuv server's limits are the defaults.
TEST(WireTable, DefaultLimitsMatchTheLibuvServer) {
  const Limits limits;
  EXPECT_EQ(limits.max_key_bytes, 8u * 1024);
  EXPECT_EQ(limits.max_value_bytes, 8u * 1024 * 1024);
  EXPECT_EQ(limits.max_keys_per_request, 128u * 1024);
  EXPECT_GE(limits.max_request_bytes, limits.max_value_bytes + limits.max_key_bytes + 17)
      << "a SET with a maximal key and value must fit in one request";
}

TEST(WireTable, DialectNamesAreDistinct) {
  EXPECT_EQ(dialectName(Dialect::Legacy113), "1.13/2.0");
  EXPECT_EQ(dialectName(Dialect::Legacy21), "2.1");
  EXPECT_EQ(dialectName(Dialect::Modern), "2.2+");
  EXPECT_EQ(dialectName(Dialect::Undecided), "undecided");
}

}  // namespace
}  // namespace ddprun::proto

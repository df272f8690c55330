#include "ddprun/proto/tcpstore_wire.hpp"

#include <array>

namespace ddprun::proto {
namespace {

constexpr std::uint8_t kNone = 0xFF;

// Index: logical Command; value: wire byte in that dialect (kNone if absent).
constexpr std::array<std::uint8_t, 19> kLegacy113Bytes = {
    kNone, 0,     1,     2,     3,     4,     5,     6,     7,    8,
    kNone, kNone, kNone, kNone, kNone, kNone, kNone, kNone, kNone};
constexpr std::array<std::uint8_t, 19> kLegacy21Bytes = {
    kNone, 0, 1, 2, 3, 4, 5, 6, kNone, 7, 8, 9, 10, 11, kNone, kNone, kNone, kNone, kNone};
constexpr std::array<std::uint8_t, 19> kModernBytes = {0, 1,  2,  3,  4,  5,  6,  7,  kNone, 8,
                                                       9, 10, 11, 12, 13, 14, 15, 16, 17};

const std::array<std::uint8_t, 19>* tableFor(Dialect dialect) {
  switch (dialect) {
    case Dialect::Legacy113:
      return &kLegacy113Bytes;
    case Dialect::Legacy21:
      return &kLegacy21Bytes;
    case Dialect::Modern:
      return &kModernBytes;
    case Dialect::Undecided:
      return nullptr;
  }
  return nullptr;
}

using ReverseTable = std::array<std::uint8_t, 256>;

// Wire byte -> logical command index, built at compile time from a table above.
constexpr ReverseTable reverseOf(const std::array<std::uint8_t, 19>& forward) {
  ReverseTable reverse{};
  reverse.fill(kNone);
  for (std::size_t i = 0; i < forward.size(); ++i) {
    if (forward[i] != kNone) {
      reverse[forward[i]] = static_cast<std::uint8_t>(i);
    }
  }
  return reverse;
}

constexpr ReverseTable kLegacy113Commands = reverseOf(kLegacy113Bytes);
constexpr ReverseTable kLegacy21Commands = reverseOf(kLegacy21Bytes);
constexpr ReverseTable kModernCommands = reverseOf(kModernBytes);

// The tables above must agree with the explicit enums in the header.
static_assert(kLegacy113Bytes[static_cast<int>(Command::WatchKey)] ==
              static_cast<std::uint8_t>(Legacy113Byte::WatchKey));
static_assert(kLegacy113Bytes[static_cast<int>(Command::DeleteKey)] ==
              static_cast<std::uint8_t>(Legacy113Byte::DeleteKey));
static_assert(kLegacy21Bytes[static_cast<int>(Command::CancelWait)] ==
              static_cast<std::uint8_t>(Legacy21Byte::CancelWait));
static_assert(kModernBytes[static_cast<int>(Command::List)] ==
              static_cast<std::uint8_t>(ModernByte::List));
static_assert(kModernBytes[static_cast<int>(Command::Ping)] ==
              static_cast<std::uint8_t>(ModernByte::Ping));

}  // namespace

std::string_view dialectName(Dialect dialect) {
  switch (dialect) {
    case Dialect::Undecided:
      return "undecided";
    case Dialect::Legacy113:
      return "1.13/2.0";
    case Dialect::Legacy21:
      return "2.1";
    case Dialect::Modern:
      return "2.2+";
  }
  return "?";
}

std::string_view commandName(Command command) {
  static constexpr std::array<std::string_view, 19> kNames = {
      "VALIDATE",   "SET",       "COMPARE_SET", "GET",         "ADD",
      "CHECK",      "WAIT",      "GETNUMKEYS",  "WATCH_KEY",   "DELETE_KEY",
      "APPEND",     "MULTI_GET", "MULTI_SET",   "CANCEL_WAIT", "PING",
      "QUEUE_PUSH", "QUEUE_POP", "QUEUE_LEN",   "LIST"};
  return kNames.at(static_cast<std::size_t>(command));
}

std::optional<Command> commandFromWire(Dialect dialect, std::uint8_t byte) {
  const ReverseTable* reverse = nullptr;
  switch (dialect) {
    case Dialect::Legacy113:
      reverse = &kLegacy113Commands;
      break;
    case Dialect::Legacy21:
      reverse = &kLegacy21Commands;
      break;
    case Dialect::Modern:
      reverse = &kModernCommands;
      break;
    case Dialect::Undecided:
      return std::nullopt;
  }
  const std::uint8_t index = (*reverse)[byte];
  if (index == kNone) {
    return std::nullopt;
  }
  return static_cast<Command>(index);
}

std::optional<std::uint8_t> wireByte(Dialect dialect, Command command) {
  const auto* table = tableFor(dialect);
  if (table == nullptr) {
    return std::nullopt;
  }
  const std::uint8_t byte = (*table)[static_cast<std::size_t>(command)];
  if (byte == kNone) {
    return std::nullopt;
  }
  return byte;
}

}  // namespace ddprun::proto

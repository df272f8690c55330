// The c10d TCPStore wire vocabulary: command bytes per dialect, reply enums,
// the VALIDATE magic and the input limits. Pure data; no I/O.
//
// Byte values were checked on the wire against PyTorch 1.13.1 (dialect A) and
// 2.6.0 (dialect E); 2.1 (C), the queues (2.8+) and LIST (2.10+) come from the
// PyTorch sources. See docs/tcpstore-protocol.md §2 (dialects) and §5 (bytes).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace ddprun::proto {

// A connection's dialect. Legacy connections are either 1.13/2.0 (A) or 2.1
// (C); the two cannot be told apart from the bytes, so the server is told
// which to assume. Modern (2.2+) connections announce themselves with VALIDATE.
enum class Dialect : std::uint8_t {
  Undecided = 0,
  Legacy113 = 1,  // PyTorch 1.13 and 2.0: no handshake, WATCH_KEY, callback connection
  Legacy21 = 2,   // PyTorch 2.1: no handshake, no WATCH_KEY
  Modern = 3,     // PyTorch 2.2+: VALIDATE first; PING (2.5+), queues (2.8+), LIST (2.10+)
};

std::string_view dialectName(Dialect dialect);

// Logical commands, independent of any dialect's numbering.
enum class Command : std::uint8_t {
  Validate,
  Set,
  CompareSet,
  Get,
  Add,
  Check,
  Wait,
  GetNumKeys,
  WatchKey,
  DeleteKey,
  Append,
  MultiGet,
  MultiSet,
  CancelWait,
  Ping,
  QueuePush,
  QueuePop,
  QueueLen,
  List,
};

std::string_view commandName(Command command);

// Dialect A: PyTorch 1.13 and 2.0 (verified on the wire with 1.13.1).
enum class Legacy113Byte : std::uint8_t {
  Set = 0,
  CompareSet = 1,
  Get = 2,
  Add = 3,
  Check = 4,
  Wait = 5,
  GetNumKeys = 6,
  WatchKey = 7,
  DeleteKey = 8,
};

// Dialect C: PyTorch 2.1 (from source; WATCH_KEY removed, later bytes shift down).
enum class Legacy21Byte : std::uint8_t {
  Set = 0,
  CompareSet = 1,
  Get = 2,
  Add = 3,
  Check = 4,
  Wait = 5,
  GetNumKeys = 6,
  DeleteKey = 7,
  Append = 8,
  MultiGet = 9,
  MultiSet = 10,
  CancelWait = 11,
};

// Dialects D to G: PyTorch 2.2 and later (0..13 verified with 2.6.0).
enum class ModernByte : std::uint8_t {
  Validate = 0,
  Set = 1,
  CompareSet = 2,
  Get = 3,
  Add = 4,
  Check = 5,
  Wait = 6,
  GetNumKeys = 7,
  DeleteKey = 8,
  Append = 9,
  MultiGet = 10,
  MultiSet = 11,
  CancelWait = 12,
  Ping = 13,       // 2.5+
  QueuePush = 14,  // 2.8+
  QueuePop = 15,   // 2.8+
  QueueLen = 16,   // 2.8+
  List = 17,       // 2.10+
};

enum class CheckResponse : std::uint8_t { Ready = 0, NotReady = 1 };
enum class WaitResponse : std::uint8_t { StopWaiting = 0, WaitCanceled = 1 };
enum class WatchResponse : std::uint8_t {
  KeyUpdated = 0,
  KeyCreated = 1,
  KeyDeleted = 2,
  KeyCallbackRegistered = 3,
};

// VALIDATE's payload; on the wire (little-endian) the bytes CE F7 85 3C.
inline constexpr std::uint32_t kValidateMagic = 0x3C85F7CEu;

// Maps a wire byte to a command in a decided dialect; nullopt when the byte
// means nothing in that dialect.
std::optional<Command> commandFromWire(Dialect dialect, std::uint8_t byte);

// The byte a command is sent as in a dialect; nullopt when the dialect lacks it.
std::optional<std::uint8_t> wireByte(Dialect dialect, Command command);

// Input limits, checked before anything is allocated. The defaults match
// PyTorch's libuv server (8 KiB key, 8 MiB value, 128 Ki keys per request);
// max_request_bytes bounds one request as a whole (e.g. a large MULTI_SET).
struct Limits {
  std::size_t max_key_bytes = 8 * 1024;
  std::size_t max_value_bytes = 8 * 1024 * 1024;
  std::size_t max_keys_per_request = 128 * 1024;
  std::size_t max_request_bytes = 64 * 1024 * 1024;
};

}  // namespace ddprun::proto

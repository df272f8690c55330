// Hex helpers for wire-level tests: fixtures store bytes as lowercase hex,
// and failure messages print bytes the same way so they can be diffed
// against the fixture files by eye. Pure functions.
#pragma once

#include <string>
#include <string_view>

namespace ddprun::test_support {

// "0a0b" (spaces allowed between digits, as docs/tcpstore-protocol.md writes
// bytes) -> "\x0a\x0b". Throws std::invalid_argument on odd length or a
// non-hex digit.
std::string fromHex(std::string_view hex);

// "\x0a\x0b" -> "0a0b".
std::string toHex(std::string_view bytes);

}  // namespace ddprun::test_support

// Request layouts: the fields after the command byte, in wire order. One
// table shared by the decoder and the encoder, so the two cannot disagree
// about a command's fields. Internal to ddprun::proto.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "ddprun/proto/tcpstore_wire.hpp"

namespace ddprun::proto::layout {

// KeyList: u64 count, then that many keys. Pairs: u64 count, then that many
// key, value pairs.
enum class Field : std::uint8_t { U32, I64, Key, Value, KeyList, Pairs };

struct Layout {
  std::array<Field, 3> fields;
  std::uint8_t count;
};

// Index: Command.
inline constexpr std::array<Layout, 19> kLayouts = {{
    {{Field::U32}, 1},                              // Validate
    {{Field::Key, Field::Value}, 2},                // Set
    {{Field::Key, Field::Value, Field::Value}, 3},  // CompareSet
    {{Field::Key}, 1},                              // Get
    {{Field::Key, Field::I64}, 2},                  // Add
    {{Field::KeyList}, 1},                          // Check
    {{Field::KeyList}, 1},                          // Wait
    {{}, 0},                                        // GetNumKeys
    {{Field::Key}, 1},                              // WatchKey
    {{Field::Key}, 1},                              // DeleteKey
    {{Field::Key, Field::Value}, 2},                // Append
    {{Field::KeyList}, 1},                          // MultiGet
    {{Field::Pairs}, 1},                            // MultiSet
    {{}, 0},                                        // CancelWait
    {{Field::U32}, 1},                              // Ping
    {{Field::Key, Field::Value}, 2},                // QueuePush
    {{Field::Key}, 1},                              // QueuePop
    {{Field::Key}, 1},                              // QueueLen
    {{}, 0},                                        // List
}};

inline const Layout& of(Command command) { return kLayouts[static_cast<std::size_t>(command)]; }

}  // namespace ddprun::proto::layout

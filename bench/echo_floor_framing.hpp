// The echo floor's framing (see echo_floor.cpp): finds each complete request
// in what a connection sent, by LibTorch 1.13's layout of the commands
// store_bench's raw load sends (SET, GET, ADD, CHECK, WAIT), and appends the
// reply its client waits for. Stateless functions over one connection's
// state; run by the echo floor's one thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace ddprun::bench {

// What the echo floor keeps per connection: no store, only what makes its
// replies the size and shape a store's would be under the raw load.
struct EchoConnection {
  std::string partial;      // a request whose rest has not arrived yet
  std::string last_value;   // what the connection last SET: its GETs' reply
  std::uint64_t added = 0;  // the sum of its ADDs: their reply
};

// Answers every complete request in what `connection` held back and
// `arrived`, in order, appending the replies to `reply`; keeps an incomplete
// tail for the next read. Returns why the connection must close (a command
// the raw load never sends, a request too large), or null.
const char* answerArrived(std::string_view arrived, EchoConnection& connection, std::string& reply);

}  // namespace ddprun::bench

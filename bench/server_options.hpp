// The command line every store server that store_bench starts as a child
// takes (libtorch_store_server, echo_floor): where to listen, and where to
// tell the port it bound, so the bench starts and finds them all one way.
// Stateless; called from a server's main thread.
#pragma once

#include <cstdint>
#include <string>

namespace ddprun::bench {

struct ServerOptions {
  std::string host = "127.0.0.1";
  std::uint16_t port = 0;  // 0: a free port
  std::string port_file;   // empty: none
};

// --host ADDR, --port N, --port-file PATH; throws std::invalid_argument on
// anything else or a missing value.
ServerOptions parseServerOptions(int argc, char** argv);

// Writes `port` and a newline to `path` atomically (write, then rename), so
// test_support::waitForPortFile never reads half of it.
void writePortFile(const std::string& path, std::uint16_t port);

}  // namespace ddprun::bench

// The two servers under test, each hosted in its own child process so that
// the load generator in this process is identical for both.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "child_process.hpp"

namespace ddprun::bench {

enum class ServerKind { Ddprund, Libtorch };

std::string serverName(ServerKind kind);

struct ServerConfig {
  std::filesystem::path ddprund;          // the ddprund executable
  std::filesystem::path libtorch_server;  // the libtorch_store_server helper
  int ddprund_threads = 1;
  std::string host = "127.0.0.1";
};

// A server listening on a free port; stopped (SIGTERM, then SIGKILL) on
// destruction.
class RunningServer {
 public:
  RunningServer(ServerKind kind, const ServerConfig& config, const TempDir& scratch);

  ServerKind kind() const { return kind_; }
  std::uint16_t port() const { return port_; }
  double cpuSeconds() const { return child_.cpuSeconds(); }
  // Stops the server and says how it exited (a clean run is "exit 0").
  std::string stop() { return child_.stop(); }

 private:
  ServerKind kind_;
  std::filesystem::path port_file_;
  ChildProcess child_;
  std::uint16_t port_ = 0;
};

}  // namespace ddprun::bench

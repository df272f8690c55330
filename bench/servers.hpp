// The servers under test, and the echo floor they are measured against,
// each hosted in its own child process so that the load generator in this
// process is identical for all.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "ddprun/launcher/process/subprocess.hpp"
#include "ddprun/test_support/temp_dir.hpp"

namespace ddprun::bench {

// EchoFloor: echo_floor, the kernel's floor under the raw load only (it
// answers nothing else).
enum class ServerKind { Ddprund, Libtorch, EchoFloor };

std::string serverName(ServerKind kind);

struct ServerConfig {
  std::filesystem::path ddprund;          // the ddprund executable
  std::filesystem::path libtorch_server;  // the libtorch_store_server helper
  std::filesystem::path echo_floor;       // the echo_floor helper
  int ddprund_threads = 1;
  std::string host = "127.0.0.1";
  std::vector<std::string> ddprund_args;  // more flags for ddprund (a soak's retention)
};

// Why `kind` cannot be run with `config` (its program is missing), or empty.
std::string serverMissing(ServerKind kind, const ServerConfig& config);

// A server listening on a free port. Owns its Subprocess: the server's
// stdout is discarded (each prints a banner we do not need), its stderr goes
// to ours so its errors stay visible, and it dies with the benchmark. Killed
// on destruction if stop() was not called. Used by store_bench's main thread.
class RunningServer {
 public:
  RunningServer(ServerKind kind, const ServerConfig& config, const test_support::TempDir& scratch);

  ServerKind kind() const { return kind_; }
  std::uint16_t port() const { return port_; }
  pid_t pid() const { return child_.pid(); }
  // The process, for a wait on another port file it writes.
  launcher::Subprocess& child() { return child_; }
  // User + system CPU seconds the server has used so far (from /proc).
  double cpuSeconds() const;
  // How the server ended ("exit 1", "signal 9"), once it has, waiting up to
  // `grace` for an end that may be under way (a connection it dropped as it
  // died); "" while it runs.
  std::string ended(std::chrono::milliseconds grace);
  // SIGTERM, then SIGKILL after a grace period; says how the server exited
  // (a clean run is "exit 0").
  std::string stop();

 private:
  ServerKind kind_;
  std::filesystem::path port_file_;
  launcher::Subprocess child_;
  std::uint16_t port_ = 0;
};

}  // namespace ddprun::bench

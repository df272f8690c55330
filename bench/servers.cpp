#include "servers.hpp"

#include <atomic>
#include <chrono>
#include <vector>

namespace ddprun::bench {
namespace {

std::vector<std::string> commandLine(ServerKind kind, const ServerConfig& config,
                                     const std::filesystem::path& port_file) {
  if (kind == ServerKind::Ddprund) {
    return {config.ddprund.string(),
            "--host",
            config.host,
            "--port",
            "0",
            "--threads",
            std::to_string(config.ddprund_threads),
            "--port-file",
            port_file.string(),
            "--log-level",
            "warn"};
  }
  return {config.libtorch_server.string(),
          "--host",
          config.host,
          "--port",
          "0",
          "--port-file",
          port_file.string()};
}

// Each server gets its own port file, so a stale file can never be misread.
std::filesystem::path freshPortFile(ServerKind kind, const TempDir& scratch) {
  static std::atomic<int> sequence{0};
  return scratch.path() / (serverName(kind) + "." + std::to_string(sequence++) + ".port");
}

}  // namespace

std::string serverName(ServerKind kind) {
  return kind == ServerKind::Ddprund ? "ddprund" : "libtorch";
}

RunningServer::RunningServer(ServerKind kind, const ServerConfig& config, const TempDir& scratch)
    : kind_(kind),
      port_file_(freshPortFile(kind, scratch)),
      child_(commandLine(kind, config, port_file_)) {
  port_ = waitForPortFile(port_file_, child_, std::chrono::seconds(20));
}

}  // namespace ddprun::bench

#include "servers.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <stdexcept>
#include <system_error>
#include <vector>

#include "child_runs.hpp"
#include "ddprun/test_support/port_file.hpp"
#include "ddprun/test_support/proc_status.hpp"

namespace ddprun::bench {
namespace {

constexpr std::chrono::milliseconds kStartTimeout(20000);
constexpr std::chrono::milliseconds kStopGrace(3000);

const std::filesystem::path& programOf(ServerKind kind, const ServerConfig& config) {
  switch (kind) {
    case ServerKind::Ddprund:
      return config.ddprund;
    case ServerKind::Libtorch:
      return config.libtorch_server;
    case ServerKind::EchoFloor:
      break;
  }
  return config.echo_floor;
}

std::vector<std::string> commandLine(ServerKind kind, const ServerConfig& config,
                                     const std::filesystem::path& port_file) {
  if (kind == ServerKind::Ddprund) {
    std::vector<std::string> argv = {config.ddprund.string(),
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
    argv.insert(argv.end(), config.ddprund_args.begin(), config.ddprund_args.end());
    return argv;
  }
  // The helpers take the same three flags.
  return {programOf(kind, config).string(),
          "--host",
          config.host,
          "--port",
          "0",
          "--port-file",
          port_file.string()};
}

// Each server gets its own port file, so a stale file can never be misread.
std::filesystem::path freshPortFile(ServerKind kind, const test_support::TempDir& scratch) {
  static std::atomic<int> sequence{0};
  return scratch.path() / (serverName(kind) + "." + std::to_string(sequence++) + ".port");
}

launcher::Subprocess spawnServer(std::vector<std::string> argv) {
  launcher::SpawnOptions options;
  options.argv = std::move(argv);
  options.env = launcher::inheritedEnvironment();
  const int devnull = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  if (devnull < 0) {
    throw std::system_error(errno, std::generic_category(), "open /dev/null");
  }
  options.stdout_fd = devnull;
  try {
    launcher::Subprocess child(options);
    ::close(devnull);
    return child;
  } catch (...) {
    ::close(devnull);
    throw;
  }
}

}  // namespace

std::string serverName(ServerKind kind) {
  switch (kind) {
    case ServerKind::Ddprund:
      return "ddprund";
    case ServerKind::Libtorch:
      return "libtorch";
    case ServerKind::EchoFloor:
      break;
  }
  return "echo_floor";
}

std::string serverMissing(ServerKind kind, const ServerConfig& config) {
  const std::filesystem::path& program = programOf(kind, config);
  if (program.empty()) {
    return "no " + serverName(kind) + " program given";
  }
  std::error_code ignored;
  if (!std::filesystem::exists(program, ignored)) {
    return program.string() + " does not exist" +
           (kind == ServerKind::Libtorch ? " (it is built only where LibTorch is found)" : "");
  }
  return "";
}

RunningServer::RunningServer(ServerKind kind, const ServerConfig& config,
                             const test_support::TempDir& scratch)
    : kind_(kind),
      port_file_(freshPortFile(kind, scratch)),
      child_(spawnServer(commandLine(kind, config, port_file_))) {
  const auto port = test_support::waitForPortFile(port_file_, child_, kStartTimeout);
  if (!port) {
    const std::string file = port_file_.filename().string();
    if (child_.exitStatus()) {
      throw std::runtime_error("server exited before writing " + file + " (" + stop() + ")");
    }
    throw std::runtime_error("server did not write " + file + " within " +
                             std::to_string(kStartTimeout.count()) + " ms");
  }
  port_ = *port;
}

double RunningServer::cpuSeconds() const { return test_support::cpuSecondsOf(child_.pid()); }

std::string RunningServer::ended(std::chrono::milliseconds grace) {
  return child_.waitFor(grace) ? describeStatus(child_) : "";
}

std::string RunningServer::stop() { return stopAndDescribe(child_, kStopGrace); }

}  // namespace ddprun::bench

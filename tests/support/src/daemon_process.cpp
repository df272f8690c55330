#include "ddprun/test_support/daemon_process.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <stdexcept>
#include <system_error>

#include "ddprun/test_support/files.hpp"
#include "ddprun/test_support/port_file.hpp"
#include "ddprun/test_support/proc_status.hpp"

#ifndef DDPRUN_DEFAULT_DAEMON_PATH
#define DDPRUN_DEFAULT_DAEMON_PATH ""
#endif

namespace ddprun::test_support {

namespace {

// Generous: ddprund starts in milliseconds, but CI machines can be loaded
// (sanitizer builds, parallel ctest) and a slow start is not what we test.
constexpr std::chrono::milliseconds kStartTimeout(20000);

std::filesystem::path existingBinary(std::filesystem::path binary) {
  if (binary.empty() || !std::filesystem::exists(binary)) {
    throw std::runtime_error("daemon binary '" + binary.string() +
                             "' not found; build ddprund or set DDPRUN_DAEMON");
  }
  // Absolute, so a bare name means the file checked here, not one on PATH.
  return std::filesystem::absolute(binary);
}

// A file the child writes its output to; closed again once it is spawned.
class OutputFile {
 public:
  explicit OutputFile(const std::filesystem::path& path)
      : fd_(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)) {
    if (fd_ < 0) {
      throw std::system_error(errno, std::generic_category(), "open " + path.string());
    }
  }
  ~OutputFile() { ::close(fd_); }
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;
  int fd() const { return fd_; }

 private:
  int fd_;
};

}  // namespace

std::filesystem::path DaemonProcess::defaultBinary() {
  if (const char* env = std::getenv("DDPRUN_DAEMON"); env != nullptr && *env != '\0') {
    return env;
  }
  return DDPRUN_DEFAULT_DAEMON_PATH;
}

DaemonProcess::DaemonProcess(std::vector<std::string> args)
    : DaemonProcess(defaultBinary(), std::move(args)) {}

DaemonProcess::DaemonProcess(std::filesystem::path binary, std::vector<std::string> args)
    : binary_(existingBinary(std::move(binary))),
      dir_("ddprun-daemon"),
      process_(spawn(std::move(args))) {
  try {
    waitForPort(kStartTimeout);
  } catch (...) {
    stop(Millis(2000));
    throw;
  }
}

DaemonProcess::~DaemonProcess() {
  try {
    stop();
  } catch (...) {
    // A destructor must not throw; Subprocess's own destructor kills the child.
  }
}

// Subprocess gives the child its own process group, so a terminal's Ctrl-C
// reaches the test runner only, and default signal handling, whatever the
// test runner ignores or blocks.
launcher::Subprocess DaemonProcess::spawn(std::vector<std::string> args) const {
  launcher::SpawnOptions options;
  options.argv = {binary_.string()};
  options.argv.insert(options.argv.end(), args.begin(), args.end());
  // A port the test chose (to restart a daemon where agents expect it) wins.
  if (std::find(args.begin(), args.end(), "--port") == args.end()) {
    options.argv.insert(options.argv.end(), {"--port", "0"});
  }
  options.argv.insert(options.argv.end(), {"--port-file", (dir_ / "port").string()});
  options.env = launcher::inheritedEnvironment();
  const OutputFile out(dir_ / "stdout");
  const OutputFile err(dir_ / "stderr");
  options.stdout_fd = out.fd();
  options.stderr_fd = err.fd();
  return launcher::Subprocess(options);
}

void DaemonProcess::waitForPort(Millis timeout) {
  const auto port = test_support::waitForPortFile(dir_ / "port", process_, timeout);
  if (!port) {
    const auto exited = exitedStatus();
    throw std::runtime_error(
        binary_.filename().string() +
        (exited ? " exited with status " + std::to_string(*exited) : " wrote no port file") +
        " during start-up; its stderr:\n" + stderrText());
  }
  port_ = *port;
}

std::string DaemonProcess::stderrText() const { return readFile(dir_ / "stderr"); }

std::string DaemonProcess::stdoutText() const { return readFile(dir_ / "stdout"); }

std::optional<std::size_t> DaemonProcess::residentKiB() const {
  return procStatusKiB(pid(), "VmRSS");
}

std::optional<int> DaemonProcess::exitedStatus() {
  if (const auto status = process_.tryWait()) {
    return status->shellCode();
  }
  return std::nullopt;
}

int DaemonProcess::stop(Millis grace) { return process_.stop(grace).shellCode(); }

CommandResult DaemonProcess::runToEnd(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {defaultBinary().string()};
  argv.insert(argv.end(), args.begin(), args.end());
  CommandOptions options;
  options.env = {{"PATH", "/usr/bin:/bin"}};
  options.timeout = std::chrono::seconds(10);
  return runCommand(argv, options);
}

}  // namespace ddprun::test_support

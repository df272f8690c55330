#include "ddprun/test_support/daemon_process.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <system_error>

#include "ddprun/test_support/eventually.hpp"

extern char** environ;

#ifndef DDPRUN_DEFAULT_DAEMON_PATH
#define DDPRUN_DEFAULT_DAEMON_PATH ""
#endif

namespace ddprun::test_support {

namespace {

// Generous: ddprund starts in milliseconds, but CI machines can be loaded
// (sanitizer builds, parallel ctest) and a slow start is not what we test.
constexpr std::chrono::milliseconds kStartTimeout(20000);

std::string readWholeFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

int decodeWaitStatus(int status) {
  if (WIFEXITED(status)) {
    return WEXITSTATUS(status);
  }
  return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : -1;
}

// RAII for the posix_spawn attribute objects.
struct SpawnSetup {
  posix_spawn_file_actions_t actions{};
  posix_spawnattr_t attr{};

  SpawnSetup() {
    posix_spawn_file_actions_init(&actions);
    posix_spawnattr_init(&attr);
  }
  ~SpawnSetup() {
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
  }
  SpawnSetup(const SpawnSetup&) = delete;
  SpawnSetup& operator=(const SpawnSetup&) = delete;
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
    : binary_(std::move(binary)), dir_("ddprun-daemon") {
  if (binary_.empty() || !std::filesystem::exists(binary_)) {
    throw std::runtime_error("daemon binary '" + binary_.string() +
                             "' not found; build ddprund or set DDPRUN_DAEMON");
  }
  args.insert(args.end(), {"--port", "0", "--port-file", (dir_ / "port").string()});
  spawn(args);
  try {
    waitForPortFile(kStartTimeout);
  } catch (...) {
    stop(Millis(2000));
    throw;
  }
}

DaemonProcess::~DaemonProcess() {
  try {
    stop();
  } catch (...) {
    // A destructor must not throw; the child is killed by then anyway.
  }
}

void DaemonProcess::spawn(const std::vector<std::string>& args) {
  SpawnSetup setup;
  posix_spawn_file_actions_addopen(&setup.actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&setup.actions, 1, (dir_ / "stdout").c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&setup.actions, 2, (dir_ / "stderr").c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  // Own process group, so a terminal's Ctrl-C reaches the test runner only;
  // default signal handling, whatever the test runner ignores or blocks.
  sigset_t defaults;
  sigemptyset(&defaults);
  for (int sig : {SIGTERM, SIGINT, SIGPIPE, SIGHUP}) {
    sigaddset(&defaults, sig);
  }
  sigset_t empty;
  sigemptyset(&empty);
  posix_spawnattr_setsigdefault(&setup.attr, &defaults);
  posix_spawnattr_setsigmask(&setup.attr, &empty);
  posix_spawnattr_setpgroup(&setup.attr, 0);
  posix_spawnattr_setflags(&setup.attr,
                           POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);

  std::vector<std::string> argv_storage{binary_.string()};
  argv_storage.insert(argv_storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& arg : argv_storage) {
    argv.push_back(arg.data());
  }
  argv.push_back(nullptr);
  const int rc =
      posix_spawn(&pid_, binary_.c_str(), &setup.actions, &setup.attr, argv.data(), environ);
  if (rc != 0) {
    pid_ = -1;
    throw std::system_error(rc, std::generic_category(), "posix_spawn " + binary_.string());
  }
}

void DaemonProcess::waitForPortFile(Millis timeout) {
  const auto port_file = dir_ / "port";
  std::optional<int> exited;
  const bool ready = eventually(
      [&] {
        exited = exitedStatus();
        if (exited) {
          return true;
        }
        // The daemon renames the file into place, but tolerate a plain write
        // by insisting on the trailing newline.
        const std::string text = readWholeFile(port_file);
        return !text.empty() && text.back() == '\n';
      },
      timeout);
  if (exited || !ready) {
    throw std::runtime_error(
        binary_.filename().string() +
        (exited ? " exited with status " + std::to_string(*exited) : " wrote no port file") +
        " during start-up; its stderr:\n" + stderrText());
  }
  const unsigned long port = std::stoul(readWholeFile(port_file));
  if (port == 0 || port > 65535) {
    throw std::runtime_error("bad port in the port file: " + std::to_string(port));
  }
  port_ = static_cast<std::uint16_t>(port);
}

std::string DaemonProcess::stderrText() const { return readWholeFile(dir_ / "stderr"); }

std::string DaemonProcess::stdoutText() const { return readWholeFile(dir_ / "stdout"); }

std::optional<std::size_t> DaemonProcess::residentKiB() const {
  std::ifstream status("/proc/" + std::to_string(pid_) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) {
      return std::stoul(line.substr(6));  // "VmRSS:    1234 kB"
    }
  }
  return std::nullopt;
}

std::optional<int> DaemonProcess::exitedStatus() {
  if (exit_status_ || pid_ <= 0) {
    return exit_status_;
  }
  int status = 0;
  const pid_t reaped = ::waitpid(pid_, &status, WNOHANG);
  if (reaped == pid_) {
    exit_status_ = decodeWaitStatus(status);
  } else if (reaped < 0 && errno == ECHILD) {
    exit_status_ = -1;  // someone else reaped it; nothing left to stop
  }
  return exit_status_;
}

int DaemonProcess::stop(Millis grace) {
  if (exitedStatus() || pid_ <= 0) {
    return exit_status_.value_or(-1);
  }
  ::kill(pid_, SIGTERM);
  if (!eventually([this] { return exitedStatus().has_value(); }, grace)) {
    ::kill(pid_, SIGKILL);
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    exit_status_ = decodeWaitStatus(status);
  }
  return *exit_status_;
}

}  // namespace ddprun::test_support

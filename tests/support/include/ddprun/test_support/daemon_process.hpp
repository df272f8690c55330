// DaemonProcess is the fixture for one daemon (ddprund by default) started
// for a test. It owns a launcher::Subprocess (the child, in its own process
// group, killed with the test process), a TempDir holding the port file and
// the captured stdout/stderr, and the duty to stop the child (SIGTERM, then
// SIGKILL after a grace period) when destroyed. The constructor returns only
// once the child has written its port file. Used by one test thread, the one
// that constructed it.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "ddprun/launcher/process/subprocess.hpp"
#include "ddprun/test_support/command.hpp"
#include "ddprun/test_support/temp_dir.hpp"

namespace ddprun::test_support {

class DaemonProcess {
 public:
  using Millis = std::chrono::milliseconds;

  // Starts defaultBinary() with `args` followed by
  // `--port 0 --port-file <tempdir>/port` (no `--port 0` when `args` name a
  // port). Throws std::runtime_error (with
  // the child's stderr) if it exits or writes no port file in time.
  explicit DaemonProcess(std::vector<std::string> args = {});
  DaemonProcess(std::filesystem::path binary, std::vector<std::string> args);
  ~DaemonProcess();

  DaemonProcess(const DaemonProcess&) = delete;
  DaemonProcess& operator=(const DaemonProcess&) = delete;

  // $DDPRUN_DAEMON if set, else the ddprund that CMake built.
  static std::filesystem::path defaultBinary();
  // Runs defaultBinary() with `args` (and no --port-file) to its end, stdout
  // and stderr apart, with PATH only; one still running after 10 s is
  // SIGKILLed: what a test of ddprund's flags needs (a bad flag must never
  // start the server).
  static CommandResult runToEnd(const std::vector<std::string>& args);

  std::uint16_t port() const { return port_; }
  pid_t pid() const { return process_.pid(); }

  // Everything the child wrote so far (re-read on every call).
  std::string stderrText() const;
  std::string stdoutText() const;

  // Resident set size from /proc/<pid>/status, in KiB; nullopt once gone.
  std::optional<std::size_t> residentKiB() const;

  // Sends SIGTERM and reaps the child, escalating to SIGKILL after `grace`.
  // Returns the exit code, or 128 + signal number if a signal killed it.
  // Idempotent: later calls return the first result.
  int stop(Millis grace = Millis(10000));

  // Reaps the child if it has already exited on its own; the exit status as
  // stop() reports it, or nullopt while it runs.
  std::optional<int> exitedStatus();

 private:
  launcher::Subprocess spawn(std::vector<std::string> args) const;
  void waitForPort(Millis timeout);

  std::filesystem::path binary_;
  TempDir dir_;
  launcher::Subprocess process_;
  std::uint16_t port_ = 0;
};

}  // namespace ddprun::test_support

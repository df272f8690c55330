// Runs a program to its end and hands back what it printed and how it ended:
// the one way the tests and the benchmarks run a command (a tool such as
// `ip`, etcdctl, openssl or `train --inspect-snapshot`) and read its answer.
// Spawned with launcher::Subprocess (its own process group), its output
// captured in memory (memfd), so no scratch directory is needed. Stateless;
// blocks the calling thread until the command ends or its time is up.
#pragma once

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "ddprun/launcher/process/subprocess.hpp"

namespace ddprun::test_support {

// A child's whole environment, in order.
using Environment = std::vector<std::pair<std::string, std::string>>;

// How the command's stdout and stderr are captured.
enum class Streams {
  Separate,  // stdout in CommandResult::output, stderr in CommandResult::errors
  Merged,    // both into one file, so CommandResult::output keeps their interleaving
};

struct CommandOptions {
  // The child's whole environment; argv[0] without a '/' is looked up on its
  // PATH (see withDefaultPath).
  Environment env;
  // After this the command's whole process group is SIGKILLed and reaped.
  std::chrono::milliseconds timeout = std::chrono::seconds(30);
  Streams streams = Streams::Separate;
  // When the timeout kills the command: true throws std::runtime_error
  // naming it, false returns its result (timed_out set, code 137).
  bool throw_on_timeout = false;
};

struct CommandResult {
  launcher::ExitStatus status;  // how it ended
  int code = 0;                 // status as a shell reports it: the exit code, or 128 + signal
  bool timed_out = false;       // killed because it still ran after CommandOptions::timeout
  std::string output;           // stdout; with Streams::Merged, stdout and stderr as written
  std::string errors;           // stderr; empty with Streams::Merged
};

// Runs `argv` with `options` and waits for it. Throws launcher::SpawnError
// when it cannot be started.
CommandResult runCommand(const std::vector<std::string>& argv, const CommandOptions& options);

// `env` with PATH=`path` added in front, unless `env` sets PATH itself.
Environment withDefaultPath(Environment env, const std::string& path);

}  // namespace ddprun::test_support

#include "ddprun/test_support/command.hpp"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <stdexcept>
#include <system_error>

#include "ddprun/launcher/process/memory_file.hpp"

namespace ddprun::test_support {
namespace {

std::string joined(const std::vector<std::string>& argv) {
  std::string text;
  for (const std::string& arg : argv) {
    text += (text.empty() ? "" : " ") + arg;
  }
  return text;
}

}  // namespace

CommandResult runCommand(const std::vector<std::string>& argv, const CommandOptions& options) {
  const launcher::MemoryFile out("ddprun-command-output");
  const launcher::MemoryFile err("ddprun-command-errors");
  launcher::SpawnOptions spawn;
  spawn.argv = argv;
  spawn.env = options.env;
  spawn.stdout_fd = out.fd();
  spawn.stderr_fd = options.streams == Streams::Merged ? out.fd() : err.fd();
  launcher::Subprocess child(spawn);
  CommandResult result;
  auto status = child.waitFor(options.timeout);
  if (!status) {
    child.signalGroup(SIGKILL);
    status = child.wait();
    result.timed_out = true;
    if (options.throw_on_timeout) {
      throw std::runtime_error("'" + joined(argv) + "' still runs after " +
                               std::to_string(options.timeout.count()) + " ms");
    }
  }
  result.status = *status;
  result.code = status->shellCode();
  result.output = out.text();
  result.errors = err.text();
  return result;
}

Environment withDefaultPath(Environment env, const std::string& path) {
  const bool has_path =
      std::any_of(env.begin(), env.end(), [](const auto& entry) { return entry.first == "PATH"; });
  if (!has_path) {
    env.emplace(env.begin(), "PATH", path);
  }
  return env;
}

}  // namespace ddprun::test_support

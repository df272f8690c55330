#include "ddprun/test_support/command.hpp"

#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <stdexcept>
#include <system_error>

namespace ddprun::test_support {
namespace {

// An in-memory file the child writes to, closed on every path out. Memory
// rather than a pipe: nothing has to drain it while the child runs, so a
// chatty command never blocks on a full pipe.
class CaptureFile {
 public:
  CaptureFile() : fd_(::memfd_create("ddprun-command-output", MFD_CLOEXEC)) {
    if (fd_ < 0) {
      throw std::system_error(errno, std::generic_category(), "memfd_create");
    }
  }
  ~CaptureFile() { ::close(fd_); }
  CaptureFile(const CaptureFile&) = delete;
  CaptureFile& operator=(const CaptureFile&) = delete;

  int fd() const { return fd_; }

  // Everything written to it so far.
  std::string text() const {
    std::string text;
    char buffer[4096];
    for (off_t offset = 0;;) {
      const ssize_t got = ::pread(fd_, buffer, sizeof(buffer), offset);
      if (got < 0 && errno == EINTR) {
        continue;
      }
      if (got <= 0) {
        return text;
      }
      text.append(buffer, static_cast<std::size_t>(got));
      offset += got;
    }
  }

 private:
  int fd_;
};

std::string joined(const std::vector<std::string>& argv) {
  std::string text;
  for (const std::string& arg : argv) {
    text += (text.empty() ? "" : " ") + arg;
  }
  return text;
}

}  // namespace

CommandResult runCommand(const std::vector<std::string>& argv, const CommandOptions& options) {
  const CaptureFile out;
  const CaptureFile err;
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

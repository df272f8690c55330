#include "ddprun/launcher/output/start_paths.hpp"

#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>

#include "ddprun/launcher/output/run_logs.hpp"
#include "ddprun/proto/errors.hpp"

namespace ddprun::launcher {
namespace {

namespace fs = std::filesystem;

// The nearest directory at or above `dir` that exists, which must take new
// entries: create_directories makes the rest of `dir` under it.
fs::path existingAncestor(const std::string& what, const fs::path& dir) {
  fs::path at = dir;
  struct stat info {};
  while (::stat(at.c_str(), &info) != 0) {
    const int error = errno;
    // ENOTDIR: a file on the way, which the walk up finds.
    if ((error != ENOENT && error != ENOTDIR) || at == at.parent_path()) {
      throw ConfigError(what + ": " + std::strerror(error));
    }
    at = at.parent_path();
  }
  if (!S_ISDIR(info.st_mode)) {
    throw ConfigError(what + ": " + (at == dir ? "not" : at.string() + " is not") + " a directory");
  }
  if (::access(at.c_str(), W_OK | X_OK) != 0) {
    throw ConfigError(what + ": cannot create entries in " + at.string() + " (" +
                      std::strerror(errno) + ")");
  }
  return at;
}

std::size_t nameMax(const fs::path& dir) {
  const long limit = ::pathconf(dir.c_str(), _PC_NAME_MAX);
  return limit > 0 ? static_cast<std::size_t>(limit) : NAME_MAX;
}

void checkName(const std::string& what, const std::string& name, std::size_t name_max) {
  if (name.size() > name_max) {
    throw ConfigError(what + ": the name '" + name + "' is longer than the " +
                      std::to_string(name_max) + " bytes a name may have there");
  }
}

std::string optionName(const LaunchConfig& config, const std::string& dest,
                       const std::string& flag) {
  const auto source = config.sources.find(dest);
  if (source != config.sources.end() && source->second.starts_with("env:")) {
    return source->second.substr(4) + " (" + flag + ")";
  }
  return flag;
}

// The run's directory is <run id>_XXXXXX, in a directory whose file system
// holds names of `name_max` bytes; the 256-byte rule (cli.cpp) is the
// rendezvous', not the file system's.
void checkRunIdFits(const LaunchConfig& config, std::size_t name_max) {
  const std::size_t longest = name_max - kRunDirSuffix.size();
  if (config.rdzv_id.size() > longest) {
    throw ConfigError(optionName(config, "rdzv_id", "--rdzv-id") + ": " +
                      std::to_string(config.rdzv_id.size()) +
                      " bytes, too long for the run's log directory <run id>" +
                      std::string(kRunDirSuffix) + " (names there hold " +
                      std::to_string(name_max) + " bytes): at most " + std::to_string(longest));
  }
}

void checkLogDirectory(const LaunchConfig& config) {
  if (config.log_dir == "/dev/null") {
    return;  // no files at all
  }
  std::error_code error;
  const char* tmpdir = std::getenv("TMPDIR");
  std::string what = std::string("the temporary directory") +
                     (tmpdir != nullptr ? std::string(" TMPDIR=") + tmpdir : "") +
                     " (the logs' place without --log-dir)";
  fs::path base;
  if (config.log_dir) {
    what = optionName(config, "log_dir", "--log-dir") + " " + *config.log_dir;
    base = fs::absolute(*config.log_dir, error).lexically_normal();
  } else {
    base = fs::temp_directory_path(error);
  }
  if (error) {
    throw ConfigError(what + ": " + error.message());
  }
  const fs::path existing = existingAncestor(what, base);
  const std::size_t name_max = nameMax(existing);
  // The names create_directories will make.
  for (const fs::path& part : base.lexically_relative(existing)) {
    checkName(what, part.string(), name_max);
  }
  checkRunIdFits(config, name_max);
}

// torch's server makes its pipe with mkfifo(3): the directory must exist.
void checkTimerPipe(const LaunchConfig& config) {
  if (!config.timer_file) {
    return;
  }
  std::error_code error;
  const fs::path pipe = fs::absolute(*config.timer_file, error);
  const std::string what = "the file timer's pipe " + *config.timer_file;
  if (error) {
    throw ConfigError(what + ": " + error.message());
  }
  const fs::path dir = pipe.parent_path();
  struct stat info {};
  if (::stat(dir.c_str(), &info) != 0) {
    throw ConfigError(what + ": " + dir.string() + ": " + std::strerror(errno));
  }
  existingAncestor(what, dir);  // dir itself: a directory that takes new entries
  checkName(what, pipe.filename().string(), nameMax(dir));
}

}  // namespace

void checkStartPaths(const LaunchConfig& config) {
  checkLogDirectory(config);
  checkTimerPipe(config);
}

}  // namespace ddprun::launcher

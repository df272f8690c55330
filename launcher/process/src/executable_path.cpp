#include "ddprun/launcher/process/executable_path.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <sstream>

namespace ddprun::launcher {
namespace {

// Each candidate path for `program` on `path_variable`, in order, until
// `take` returns false.
template <typename Take>
void forEachCandidate(const std::string& program, const std::string& path_variable, Take take) {
  std::istringstream dirs(path_variable);
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    if (!take((dir.empty() ? "." : dir) + "/" + program)) {
      return;
    }
  }
}

}  // namespace

bool isExecutableFile(const std::string& path) {
  struct stat info {};
  return stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode) && access(path.c_str(), X_OK) == 0;
}

std::optional<std::string> findExecutable(const std::string& program,
                                          const std::string& path_variable) {
  if (program.find('/') != std::string::npos) {
    return program;
  }
  std::optional<std::string> found;
  forEachCandidate(program, path_variable, [&](const std::string& candidate) {
    if (isExecutableFile(candidate)) {
      found = candidate;
    }
    return !found;
  });
  return found;
}

std::vector<std::string> findExecutables(const std::string& program,
                                         const std::string& path_variable) {
  std::vector<std::string> found;
  forEachCandidate(program, path_variable, [&](const std::string& candidate) {
    if (isExecutableFile(candidate)) {
      found.push_back(candidate);
    }
    return true;
  });
  return found;
}

}  // namespace ddprun::launcher

#include "ddprun/launcher/executable_path.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <sstream>

namespace ddprun::launcher {

std::optional<std::string> findExecutable(const std::string& program,
                                          const std::string& path_variable) {
  if (program.find('/') != std::string::npos) {
    return program;
  }
  std::istringstream dirs(path_variable);
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    const std::string candidate = (dir.empty() ? "." : dir) + "/" + program;
    struct stat info {};
    if (stat(candidate.c_str(), &info) == 0 && S_ISREG(info.st_mode) &&
        access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
  }
  return std::nullopt;
}

}  // namespace ddprun::launcher

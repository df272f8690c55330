#include "ddprun/launcher/watchdogs/python_stacks.hpp"

#include <signal.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <system_error>

namespace ddprun::launcher {

bool isPythonProcess(pid_t pid) {
  std::error_code error;
  const auto exe = std::filesystem::read_symlink("/proc/" + std::to_string(pid) + "/exe", error);
  return !error && exe.filename().string().rfind("python", 0) == 0;
}

bool abortForPythonStacks(pid_t pid) {
  if (!isPythonProcess(pid)) {
    return false;
  }
  rlimit current{};
  if (::prlimit(pid, RLIMIT_CORE, nullptr, &current) == 0) {
    const rlimit no_core{0, current.rlim_max};
    ::prlimit(pid, RLIMIT_CORE, &no_core, nullptr);  // best effort: the stacks matter more
  }
  // To the main thread, which is a Python one: faulthandler run by a thread
  // Python never saw (Gloo's, NCCL's) prints only "<no Python frame>".
  return ::syscall(SYS_tgkill, pid, pid, SIGABRT) == 0;
}

}  // namespace ddprun::launcher

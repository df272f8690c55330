#include "ddprun/launcher/process/worker_limits.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace ddprun::launcher {
namespace {

// A soft limit, or 0 when there is none.
std::uint64_t softLimit(int resource) {
  rlimit limit{};
  if (getrlimit(resource, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) {
    return 0;
  }
  return limit.rlim_cur;
}

std::uint64_t openDescriptors() {
  std::error_code error;
  std::uint64_t count = 0;
  for (std::filesystem::directory_iterator entry("/proc/self/fd", error), end;
       !error && entry != end; entry.increment(error)) {
    ++count;
  }
  return count > 0 ? count - 1 : 0;  // not the directory's own descriptor
}

std::uint64_t pidMax() {
  std::ifstream file("/proc/sys/kernel/pid_max");
  std::uint64_t value = 0;
  return file >> value ? value : 0;
}

}  // namespace

ProcessLimits currentProcessLimits() {
  ProcessLimits limits;
  limits.open_files = softLimit(RLIMIT_NOFILE);
  limits.open_now = openDescriptors();
  // The kernel counts processes per real user and does not apply the limit
  // to root.
  limits.processes = getuid() == 0 ? 0 : softLimit(RLIMIT_NPROC);
  limits.pid_max = pidMax();
  return limits;
}

std::optional<std::string> workerLimitProblem(int nproc, const ProcessLimits& limits) {
  const auto workers = static_cast<std::uint64_t>(nproc);
  const bool one = nproc == 1;
  const std::string count = std::to_string(nproc) + (one ? " worker" : " workers");
  const std::uint64_t descriptors =
      limits.open_now + kAgentDescriptors + workers * kDescriptorsPerWorker;
  if (limits.open_files != 0 && descriptors > limits.open_files) {
    return count + (one ? " needs " : " need ") + std::to_string(descriptors) +
           " file descriptors in ddprun, over its limit of " + std::to_string(limits.open_files) +
           " (RLIMIT_NOFILE; raise it with ulimit -n)";
  }
  if (limits.processes != 0 && workers > limits.processes) {
    return count + (one ? " is" : " are") + " more processes than this user's limit of " +
           std::to_string(limits.processes) + " (RLIMIT_NPROC; raise it with ulimit -u)";
  }
  if (limits.pid_max != 0 && workers >= limits.pid_max) {
    return count + (one ? " is" : " are") +
           " more processes than the kernel has process ids for (kernel.pid_max " +
           std::to_string(limits.pid_max) + ")";
  }
  return std::nullopt;
}

}  // namespace ddprun::launcher

#include "descriptor_limit.hpp"

#include <sys/resource.h>

#include <cerrno>
#include <cstring>
#include <fstream>

namespace ddprun::rdzv {
namespace {

// The most a process may set RLIMIT_NOFILE to (Linux refuses more, even
// when the hard limit is unlimited).
std::uint64_t kernelMaximum() {
  std::ifstream file("/proc/sys/fs/nr_open");
  std::uint64_t value = 0;
  return file >> value && value > 0 ? value : 1048576;
}

}  // namespace

DescriptorLimit raiseDescriptorLimit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) {
    return {0, 0, std::strerror(errno)};
  }
  DescriptorLimit result{limit.rlim_cur, limit.rlim_cur, ""};
  const rlim_t target =
      limit.rlim_max == RLIM_INFINITY ? static_cast<rlim_t>(kernelMaximum()) : limit.rlim_max;
  if (limit.rlim_cur != RLIM_INFINITY && limit.rlim_cur < target) {
    limit.rlim_cur = target;
    if (setrlimit(RLIMIT_NOFILE, &limit) == 0) {
      result.now = target;
    } else {
      result.failure = std::strerror(errno);
    }
  }
  return result;
}

std::string descriptorAdvice(int error_number) {
  if (error_number == EMFILE) {
    rlimit limit{};
    const std::string count = getrlimit(RLIMIT_NOFILE, &limit) == 0 ? std::to_string(limit.rlim_cur)
                                                                    : std::string("unknown");
    return "every one of its " + count +
           " file descriptors is in use (RLIMIT_NOFILE: raise it with ulimit -n, or ulimit -Hn "
           "above the hard limit, before starting it, or LimitNOFILE= in its systemd unit)";
  }
  if (error_number == ENFILE) {
    return "the system's open-file table is full (raise the sysctl fs.file-max)";
  }
  return "";
}

}  // namespace ddprun::rdzv

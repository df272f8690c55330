#include "ddprun/test_support/fd_limit.hpp"

#include <sys/resource.h>

#include <algorithm>
#include <fstream>

namespace ddprun::test_support {

FdLimit currentFdLimit() {
  rlimit limit{};
  ::getrlimit(RLIMIT_NOFILE, &limit);
  return {limit.rlim_cur, limit.rlim_max, false};
}

std::uint64_t fsNrOpen() {
  std::uint64_t most = 0;
  if (std::ifstream("/proc/sys/fs/nr_open") >> most) {
    return most;
  }
  return 1048576;
}

FdLimit raiseFdLimit(std::uint64_t needed) {
  rlimit limit{};
  ::getrlimit(RLIMIT_NOFILE, &limit);
  bool refused = false;
  if (limit.rlim_max != RLIM_INFINITY && limit.rlim_max < needed) {
    // Only a privileged process may raise the hard limit; a refusal leaves
    // the old one, which the caller reports against what it needs.
    rlimit higher = limit;
    higher.rlim_max = std::max<rlim_t>(limit.rlim_max, std::min<rlim_t>(fsNrOpen(), needed));
    higher.rlim_cur = higher.rlim_max;
    refused = ::setrlimit(RLIMIT_NOFILE, &higher) != 0;
  }
  ::getrlimit(RLIMIT_NOFILE, &limit);
  limit.rlim_cur = limit.rlim_max;
  ::setrlimit(RLIMIT_NOFILE, &limit);
  FdLimit raised = currentFdLimit();
  raised.hard_refused = refused;
  return raised;
}

}  // namespace ddprun::test_support

// This process's descriptor limit (RLIMIT_NOFILE), read and raised: what a
// test or a benchmark holding thousands of connections needs first, before
// it starts the daemon or server that inherits the limit. Stateless; any
// thread (the limit is the whole process's).
#pragma once

#include <cstdint>
#include <limits>

namespace ddprun::test_support {

struct FdLimit {
  std::uint64_t soft = 0;
  std::uint64_t hard = 0;
  bool hard_refused = false;  // the hard limit was too low and raising it was refused
};

// The limit as it stands.
FdLimit currentFdLimit();

// fs.nr_open: the most any hard limit may be raised to (the kernel's default,
// 1048576, when /proc/sys cannot be read).
std::uint64_t fsNrOpen();

// `needed` that asks for as many descriptors as the system allows.
inline constexpr std::uint64_t kAsManyFdsAsAllowed = std::numeric_limits<std::uint64_t>::max();

// Raises RLIMIT_NOFILE so this process (and every child spawned after, which
// inherits it) can hold `needed` descriptors: the soft limit to the hard one,
// and, when that is too low and the process is privileged (root with
// CAP_SYS_RESOURCE), the hard limit too, as far as fs.nr_open allows. The
// caller compares the result's soft limit with what it needs.
FdLimit raiseFdLimit(std::uint64_t needed = kAsManyFdsAsAllowed);

}  // namespace ddprun::test_support

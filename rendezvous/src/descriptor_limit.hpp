// ddprund's file descriptor limit (RLIMIT_NOFILE). Every client connection
// holds a descriptor for as long as it is open, so the soft limit caps the
// clients: 1,024 on most systems, against tens of thousands of ranks and
// agents in a large job. Any thread; the calls only read or set the process'
// own limit.
#pragma once

#include <cstdint>
#include <string>

namespace ddprun::rdzv {

struct DescriptorLimit {
  std::uint64_t before = 0;  // the soft limit ddprund was started with
  std::uint64_t now = 0;     // the soft limit in force
  std::string failure;       // why it could not be raised; empty when it was, or needed not
};

// Raises the soft limit to the hard one (as nginx's worker_rlimit_nofile and
// Go's runtime do at start), within the kernel's fs.nr_open when the hard
// limit is unlimited. Raising a soft limit needs no privilege.
DescriptorLimit raiseDescriptorLimit();

// What a failed accept means and how to fix it, for EMFILE (this process'
// limit: named, with how to raise it) and ENFILE (the system's table is
// full); "" for any other error.
std::string descriptorAdvice(int error_number);

}  // namespace ddprun::rdzv

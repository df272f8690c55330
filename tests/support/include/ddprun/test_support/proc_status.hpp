// What /proc says about a live process (a daemon under test, a launcher
// under a benchmark): its memory and its CPU time. Stateless.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <optional>

namespace ddprun::test_support {

// A field of /proc/<pid>/status given in kB (VmRSS, VmHWM, ...), in KiB;
// nullopt once the process is gone (a zombie has no memory left to report).
std::optional<std::size_t> procStatusKiB(pid_t pid, const char* field);

// User + system CPU seconds the process has used so far; 0 once it is gone.
double cpuSecondsOf(pid_t pid);

}  // namespace ddprun::test_support

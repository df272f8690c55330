// A Python worker's own stacks, printed by the interpreter: the agent arms
// faulthandler in every worker (PYTHONFAULTHANDLER=1, WorkerEnvironment), and
// a worker armed so that receives SIGABRT prints every thread's Python stack
// on its stderr before it dies. No tool and no symbols are needed, it works
// while another thread holds the GIL or spins, and it takes no longer than
// SIGKILL would: so a hung group's Python workers are stopped with it.
//
// Free functions; any thread.
#pragma once

#include <sys/types.h>

namespace ddprun::launcher {

// Is `pid` a Python interpreter (its executable is named python*)?
bool isPythonProcess(pid_t pid);

// Stops `pid` with SIGABRT, so that its faulthandler prints every thread's
// Python stack, after setting its core size limit to 0 (a dying trainer's
// core can be tens of GiB, and nobody asked for it). False, and nothing
// sent, when `pid` is not a Python interpreter: the caller stops it as it
// would anyway.
bool abortForPythonStacks(pid_t pid);

}  // namespace ddprun::launcher

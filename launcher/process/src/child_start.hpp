// How Subprocess starts a child: the cheapest clone the kernel allows.
//
// A fork of the agent copies its page tables, and every page either side
// writes afterwards is copied again (copy-on-write), all before the child
// can exec: measured by bench/spawn_bench, 3.4 ms a spawn in an agent-like
// process against 0.6 ms for posix_spawn. So, like posix_spawn, the child
// shares the agent's memory until it execs (CLONE_VM | CLONE_VFORK: the
// calling thread waits meanwhile) and runs on a stack of its own, and unlike
// glibc 2.36's posix_spawn it starts in the job's cgroup (CLONE_INTO_CGROUP)
// and runs our own set-up (death signal, session, terminal). glibc has no
// clone3 wrapper that runs a function on a new stack, so the few
// instructions that do are written here (x86-64 only). Elsewhere, or where
// clone3 is refused, a fork-like clone3 into the cgroup, then a plain fork.
//
// The child's entry runs with every signal blocked: until it has put every
// handler back to the default, a signal must not run one of the agent's
// handlers on the agent's memory. Stateless; any thread.
#pragma once

#include <sys/types.h>

namespace ddprun::launcher::detail {

// Runs in the child; must exec or _exit, never return. `move_into_cgroup`:
// the child did not start in the cgroup and must move itself there.
using ChildEntry = void (*)(void* arg, bool move_into_cgroup);

// Starts a child that runs `entry(arg, ...)` in the cgroup `cgroup_fd` (an
// open cgroup v2 directory; < 0: this process's own). In the parent: the
// child's pid, or -1 with errno set. When the child shares this process's
// memory, this returns once it has exec'd or exited.
pid_t startChild(int cgroup_fd, ChildEntry entry, void* arg);

}  // namespace ddprun::launcher::detail

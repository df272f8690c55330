// Where a process that does not die sleeps in the kernel, as /proc tells it:
// its state (/proc/<pid>/stat), the kernel function it waits in
// (/proc/<pid>/wchan) and its kernel stack (/proc/<pid>/stack, which only a
// process with CAP_SYS_ADMIN, such as root, may read). The agent names a
// worker stuck in uninterruptible sleep with them, in one line
// (docs/launcher.md, Workers stuck in the kernel). Read on demand, nothing
// kept; stateless free functions; any thread.
#pragma once

#include <sys/types.h>

#include <string>
#include <string_view>
#include <vector>

namespace ddprun::launcher {

struct KernelWait {
  char state = '?';                // as /proc/<pid>/stat has it (R, S, D, Z, ...); '?': gone
  std::string wchan;               // the function it sleeps in; empty: none, or unreadable
  std::vector<std::string> stack;  // kernel functions, innermost first
  std::string stack_unreadable;    // why `stack` is empty: "/proc/<pid>/stack: <errno's text>"
};

KernelWait readKernelWait(pid_t pid);

// /proc/<pid>/stack's text ("[<0>] fuse_flush+0x192/0x1d0", a line a frame)
// as function names, innermost first ("fuse_flush").
std::vector<std::string> parseKernelStack(std::string_view text);

// What ps calls the state: "D (uninterruptible sleep)", "S (sleeping)", ...
std::string describeState(char state);

// One line: "state D (uninterruptible sleep), wchan request_wait_answer,
// kernel stack request_wait_answer <- __fuse_simple_request <- fuse_flush
// <- ...", or "... kernel stack unreadable (/proc/7/stack: Permission
// denied)".
std::string describeKernelWait(const KernelWait& wait);

// Its command line (/proc/<pid>/cmdline, the arguments joined by blanks),
// else, for a process whose memory is gone (it is exiting), its name in
// brackets as ps shows it ("[sh]"); empty when it is gone. Shown through
// proto::visible, at most about 200 characters.
std::string commandLineOf(pid_t pid);

}  // namespace ddprun::launcher

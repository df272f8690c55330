#include "child_start.hpp"

#include <linux/sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>

namespace ddprun::launcher::detail {
namespace {

// The child's stack while it shares the agent's memory: its set-up calls
// and execve need a few KiB; the rest is margin.
constexpr std::size_t kChildStackBytes = 64 * 1024;

struct SharedChild {
  ChildEntry entry;
  void* arg;
};

[[noreturn]] void runSharedChild(void* shared) {
  const auto* child = static_cast<const SharedChild*>(shared);
  child->entry(child->arg, false);
  _exit(127);  // entry never returns; should it, the child ends here
}

#if defined(__x86_64__)
// clone3, the child going on at `run(arg)` on the stack `args` names. The
// kernel gives the child every register of the parent but rax (0) and rsp
// (the new stack), so the child calls `run` at once, before anything reads
// the parent's frame. -errno on failure.
long cloneRunning(clone_args& args, void (*run)(void*), void* arg) {
  long result = SYS_clone3;
  asm volatile(
      "syscall\n\t"
      "testq %%rax, %%rax\n\t"
      "jnz 1f\n\t"
      "xorl %%ebp, %%ebp\n\t"  // the outermost frame: nothing to unwind into
      "movq %[arg], %%rdi\n\t"
      "callq *%[run]\n\t"
      "ud2\n"
      "1:"
      : "+a"(result)
      : "D"(&args), "S"(sizeof(args)), [run] "r"(run), [arg] "r"(arg)
      : "rcx", "r11", "memory");
  return result;
}

// The vfork-like start; -1 with errno when the kernel refuses it.
pid_t startSharing(int cgroup_fd, ChildEntry entry, void* arg) {
  void* stack = mmap(nullptr, kChildStackBytes, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
  if (stack == MAP_FAILED) {
    return -1;
  }
  SharedChild child{entry, arg};
  clone_args args{};
  args.flags = CLONE_VM | CLONE_VFORK | (cgroup_fd >= 0 ? CLONE_INTO_CGROUP : 0);
  args.exit_signal = SIGCHLD;
  args.stack = reinterpret_cast<std::uintptr_t>(stack);
  args.stack_size = kChildStackBytes;
  args.cgroup = cgroup_fd >= 0 ? static_cast<__u64>(cgroup_fd) : 0;
  const long pid = cloneRunning(args, runSharedChild, &child);
  munmap(stack, kChildStackBytes);  // the child has exec'd or exited
  if (pid < 0) {
    errno = static_cast<int>(-pid);
    return -1;
  }
  return static_cast<pid_t>(pid);
}
#endif

// A fork straight into the cgroup (clone3), else a plain fork whose child
// moves itself in. The child runs `entry` here.
pid_t startCopying(int cgroup_fd, ChildEntry entry, void* arg) {
  bool move_into_cgroup = false;
  long pid = -1;
  if (cgroup_fd >= 0) {
    clone_args args{};
    args.flags = CLONE_INTO_CGROUP;
    args.exit_signal = SIGCHLD;
    args.cgroup = static_cast<__u64>(cgroup_fd);
    pid = syscall(SYS_clone3, &args, sizeof(args));
    move_into_cgroup = pid < 0;
  }
  if (pid < 0) {
    pid = fork();
  }
  if (pid == 0) {
    entry(arg, move_into_cgroup);
    _exit(127);
  }
  return static_cast<pid_t>(pid);
}

}  // namespace

pid_t startChild(int cgroup_fd, ChildEntry entry, void* arg) {
  sigset_t all, before;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &before);
  pid_t pid = -1;
#if defined(__x86_64__)
  pid = startSharing(cgroup_fd, entry, arg);
#endif
  if (pid < 0) {
    pid = startCopying(cgroup_fd, entry, arg);
  }
  const int error = errno;
  pthread_sigmask(SIG_SETMASK, &before, nullptr);
  errno = error;
  return pid;
}

}  // namespace ddprun::launcher::detail

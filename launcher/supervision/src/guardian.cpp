#include "ddprun/launcher/supervision/guardian.hpp"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <thread>

#include "ddprun/launcher/core/log.hpp"
#include "ddprun/launcher/core/option_values.hpp"
#include "ddprun/launcher/core/run_result.hpp"
#include "ddprun/launcher/core/write_all.hpp"
#include "ddprun/launcher/process/subprocess.hpp"
#include "ddprun/launcher/supervision/kernel_wait.hpp"
#include "ddprun/launcher/supervision/process_tree.hpp"
#include "ddprun/launcher/supervision/worker_cgroup.hpp"
#include "ddprun/proto/errors.hpp"

namespace ddprun::launcher {
namespace {

// What the guardian forwards: every signal but those it cannot catch, its
// own SIGCHLD, job control (left at its default: both processes stop and go
// on together), what only the guardian's own faults or writes would raise,
// and the ones ignored by default.
sigset_t forwardedSignals() {
  static constexpr int kNotForwarded[] = {SIGKILL, SIGSTOP, SIGCHLD,  SIGTSTP, SIGTTIN, SIGTTOU,
                                          SIGCONT, SIGSEGV, SIGBUS,   SIGFPE,  SIGILL,  SIGTRAP,
                                          SIGSYS,  SIGPIPE, SIGWINCH, SIGURG};
  sigset_t set;
  sigemptyset(&set);
  for (int signal = 1; signal <= SIGRTMAX; ++signal) {
    if (std::find(std::begin(kNotForwarded), std::end(kNotForwarded), signal) ==
        std::end(kNotForwarded)) {
      sigaddset(&set, signal);  // refuses the C library's own real-time signals
    }
  }
  return set;
}

// The agent's side of the fork: told of the guardian's death by a pidfd (on
// its loop), and by SIGTERM where the agent handles SIGTERM.
GuardianLink becomeAgent(pid_t guardian, const sigset_t& previous_mask,
                         const std::vector<int>& agent_handles, const int (&answer)[2]) {
  close(answer[1]);
  const bool term =
      std::find(agent_handles.begin(), agent_handles.end(), SIGTERM) != agent_handles.end();
  if (term) {
    prctl(PR_SET_PDEATHSIG, SIGTERM);
  }
  const int guardian_pidfd = static_cast<int>(syscall(SYS_pidfd_open, guardian, 0));
  // SIGUSR1/SIGUSR2 stay ignored (main's first line) until the agent's loop
  // forwards them, so unmasking here lets none end the agent.
  sigprocmask(SIG_SETMASK, &previous_mask, nullptr);
  if (getppid() != guardian) {
    raise(SIGKILL);  // the guardian died already: no workers have started
  }
  return GuardianLink(guardian_pidfd, answer[0]);
}

// The answer GuardianLink::jobCgroup reads: "<parent>\0<name>\0<description>",
// parent and name empty where there is no cgroup.
std::string cgroupAnswer(const WorkerCgroup* cgroup, const std::string& description) {
  std::string answer = cgroup != nullptr ? cgroup->parent().string() : "";
  answer += '\0';
  answer += cgroup != nullptr ? cgroup->name() : "";
  answer += '\0';
  return answer + description;
}

// The kernel mostly starts a forked child on its parent's CPU, so the agent
// would only run once the guardian's first work was done. For that work the
// guardian steps off its CPU to another it may use, and back after: the
// agent sets itself up meanwhile. (Asking /proc which CPU the agent is on
// costs more than it saves: it contends with the agent's first page faults.)
// Nothing where it may use one CPU only.
class OffThisCpu {
 public:
  OffThisCpu() {
    const int here = sched_getcpu();
    if (here < 0 || here >= CPU_SETSIZE || sched_getaffinity(0, sizeof(allowed_), &allowed_) != 0 ||
        CPU_COUNT(&allowed_) < 2) {
      return;
    }
    cpu_set_t others = allowed_;
    CPU_CLR(here, &others);
    moved_ = CPU_COUNT(&others) > 0 && sched_setaffinity(0, sizeof(others), &others) == 0;
  }
  ~OffThisCpu() {
    if (moved_) {
      sched_setaffinity(0, sizeof(allowed_), &allowed_);
    }
  }
  OffThisCpu(const OffThisCpu&) = delete;
  OffThisCpu& operator=(const OffThisCpu&) = delete;

 private:
  cpu_set_t allowed_{};
  bool moved_ = false;
};

// The guardian's first work, while the agent sets up: the job's cgroup,
// whose place it writes to the agent (which may have died: SIGPIPE is
// ignored by then, and a short write changes nothing here).
std::unique_ptr<WorkerCgroup> makeCgroupForAgent(int answer) {
  const OffThisCpu aside;
  std::string description;
  std::unique_ptr<WorkerCgroup> cgroup;
  try {
    cgroup = makeJobCgroup(description);
  } catch (const std::exception& error) {
    description = std::string("no cgroup (") + error.what() + ")";
  }
  writeAll(answer, cgroupAnswer(cgroup.get(), description));
  close(answer);
  return cgroup;
}

// Forwards signals until the agent has ended; returns its wait status.
int superviseAgent(pid_t agent, const sigset_t& waited) {
  for (;;) {
    siginfo_t info{};
    const int signal = sigwaitinfo(&waited, &info);
    if (signal == SIGCHLD) {
      int status = 0;
      if (waitpid(agent, &status, WNOHANG) == agent) {
        return status;
      }
    } else if (signal > 0 && info.si_code != SI_KERNEL) {
      kill(agent, signal);  // SI_KERNEL: a terminal's, sent to the agent's group too
    }
  }
}

// An agent that ended with kStuckWorkerExitCode has named what is stuck in
// the kernel: it will not die in any wait, and what else the agent left it
// SIGKILLed already, which dies within milliseconds.
std::chrono::milliseconds leftoverWait(int agent_status) {
  const bool stuck = WIFEXITED(agent_status) && WEXITSTATUS(agent_status) == kStuckWorkerExitCode;
  return stuck ? std::chrono::milliseconds(500) : kLeftoverWait;
}

// Each process that outlives its SIGKILL, in a line: it is left to init.
void sayStillAlive(const std::vector<pid_t>& still_alive, std::chrono::milliseconds waited) {
  for (pid_t pid : still_alive) {
    log().warn("pid {} ({}) is still alive {} after SIGKILL, left behind: {}", pid,
               commandLineOf(pid), formatSeconds(waited), describeKernelWait(readKernelWait(pid)));
  }
}

void killWhatIsLeft(pid_t agent, int wait_status, WorkerCgroup* cgroup) {
  const std::chrono::milliseconds wait = leftoverWait(wait_status);
  const LeftoverKill kill = killEverythingLeft(cgroup, std::chrono::steady_clock::now() + wait);
  const std::string how = ExitStatus::fromWaitStatus(wait_status).describe();
  if (kill.killed() > 0) {
    log().warn("the agent (pid {}) {}: killed {} process{} it left behind (guardian, {})", agent,
               how, kill.killed(), kill.killed() == 1 ? "" : "es", kill.mechanism());
  } else if (WIFSIGNALED(wait_status)) {
    log().warn("the agent (pid {}) {}", agent, how);
  }
  sayStillAlive(kill.orphans.still_alive, wait);
  if (cgroup != nullptr && !cgroup->remove()) {
    log().warn("cannot remove the job's cgroups {}: {}", cgroup->describe(), std::strerror(errno));
  }
}

// Ends the guardian as the agent ended: its exit code, or its signal. At
// once: it holds nothing that needs tearing down.
[[noreturn]] void mirror(int wait_status) {
  std::fflush(nullptr);
  if (!WIFSIGNALED(wait_status)) {
    _exit(WEXITSTATUS(wait_status));
  }
  const int signal = WTERMSIG(wait_status);
  const rlimit no_core{0, 0};
  setrlimit(RLIMIT_CORE, &no_core);  // the agent dumped its own
  std::signal(signal, SIG_DFL);
  sigset_t only;
  sigemptyset(&only);
  sigaddset(&only, signal);
  sigprocmask(SIG_UNBLOCK, &only, nullptr);
  raise(signal);
  _exit(128 + signal);  // a signal that does not end a process by default
}

}  // namespace

GuardianLink forkAgentUnderGuardian(const std::vector<int>& agent_handles) {
  int answer[2];
  if (pipe2(answer, O_CLOEXEC) != 0) {
    throw Error(std::string("cannot start the agent: pipe: ") + std::strerror(errno));
  }
  sigset_t waited = forwardedSignals();
  sigaddset(&waited, SIGCHLD);
  // SIGCHLD is at its default here: main() resets it first thing, since an
  // inherited SIG_IGN would reap the agent (and every other child) unseen.
  sigset_t previous;
  sigprocmask(SIG_BLOCK, &waited, &previous);  // none is lost before sigwaitinfo
  prctl(PR_SET_CHILD_SUBREAPER, 1);
  const pid_t guardian = getpid();
  const pid_t agent = fork();
  if (agent < 0) {
    const int fork_error = errno;
    sigprocmask(SIG_SETMASK, &previous, nullptr);
    close(answer[0]);
    close(answer[1]);
    throw Error(std::string("cannot start the agent: fork: ") + std::strerror(fork_error));
  }
  if (agent == 0) {
    return becomeAgent(guardian, previous, agent_handles, answer);
  }
  close(answer[0]);
  std::signal(SIGPIPE, SIG_IGN);  // a closed stderr, or a dead agent's pipe, must not end it
  const std::unique_ptr<WorkerCgroup> cgroup = makeCgroupForAgent(answer[1]);
  const int wait_status = superviseAgent(agent, waited);
  killWhatIsLeft(agent, wait_status, cgroup.get());
  mirror(wait_status);
}

GuardianLink::~GuardianLink() {
  if (cgroup_answer_ >= 0) {
    close(cgroup_answer_);
  }
}

std::unique_ptr<WorkerCgroup> GuardianLink::jobCgroup(std::string& description) {
  std::string text;
  char buffer[512];
  while (cgroup_answer_ >= 0) {
    const ssize_t got = ::read(cgroup_answer_, buffer, sizeof buffer);
    if (got < 0 && errno == EINTR) {
      continue;
    }
    if (got <= 0) {
      close(cgroup_answer_);
      cgroup_answer_ = -1;
      break;
    }
    text.append(buffer, static_cast<std::size_t>(got));
  }
  const std::size_t parent_end = text.find('\0');
  const std::size_t name_end =
      parent_end == std::string::npos ? std::string::npos : text.find('\0', parent_end + 1);
  if (name_end == std::string::npos) {
    description = "no cgroup (the guardian ended before it made one)";
    return nullptr;
  }
  description = text.substr(name_end + 1);
  if (parent_end == 0) {
    return nullptr;  // the guardian made none: its description says why
  }
  std::string why_not;
  auto cgroup = WorkerCgroup::adopt(
      text.substr(0, parent_end), text.substr(parent_end + 1, name_end - parent_end - 1), why_not);
  if (!cgroup) {
    description = "no cgroup (" + why_not + ")";
  }
  return cgroup;
}

void hangUpWhenStdinEnds(const std::vector<int>& handled) {
  std::signal(SIGPIPE, SIG_IGN);
  int stop = SIGHUP;
  for (const int candidate : {SIGHUP, SIGTERM, SIGINT}) {
    if (std::find(handled.begin(), handled.end(), candidate) != handled.end()) {
      stop = candidate;
      break;
    }
  }
  std::thread([stop] {
    char buffer[256];
    for (;;) {
      const ssize_t got = ::read(STDIN_FILENO, buffer, sizeof buffer);
      if (got == 0 || (got < 0 && errno != EINTR)) {
        break;
      }
    }
    ::kill(::getpid(), stop);
  }).detach();
}

}  // namespace ddprun::launcher

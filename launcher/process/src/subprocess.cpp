// clone + exec by hand because posix_spawn cannot set PR_SET_PDEATHSIG or
// start a new session with the parent-death check in between, nor start the
// child in a cgroup (child_start.hpp). Between clone and exec the child runs
// only async-signal-safe calls on memory prepared before the clone (the
// process may have other threads, and the child may share its memory), and
// nothing that relies on the C library's fork handlers.
#include "ddprun/launcher/process/subprocess.hpp"

#include <fcntl.h>
#include <linux/close_range.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "child_start.hpp"
#include "ddprun/launcher/process/executable_path.hpp"

namespace ddprun::launcher {
namespace {

// argv/envp as the NUL-terminated arrays execve wants, built before fork.
class ExecArrays {
 public:
  explicit ExecArrays(const SpawnOptions& options) {
    for (const auto& arg : options.argv) {
      strings_.push_back(arg);
    }
    for (const auto& [name, value] : options.env) {
      strings_.emplace_back(name).append("=").append(value);
    }
    for (std::size_t i = 0; i < options.argv.size(); ++i) {
      argv_.push_back(strings_[i].data());
    }
    argv_.push_back(nullptr);
    for (std::size_t i = options.argv.size(); i < strings_.size(); ++i) {
      envp_.push_back(strings_[i].data());
    }
    envp_.push_back(nullptr);
  }
  char* const* argv() { return argv_.data(); }
  char* const* envp() { return envp_.data(); }

 private:
  std::vector<std::string> strings_;
  std::vector<char*> argv_;
  std::vector<char*> envp_;
};

std::string pathFor(const SpawnOptions& options) {
  for (const auto& [name, value] : options.env) {
    if (name == "PATH") {
      return value;
    }
  }
  const char* inherited = std::getenv("PATH");
  return inherited != nullptr ? inherited : "/usr/local/bin:/usr/bin:/bin";
}

// The CPUs a child is bound to, as sched_setaffinity wants them, allocated
// before fork (CPU_ALLOC mallocs) and sized for the highest CPU named, so
// machines with more than cpu_set_t's 1024 CPUs work too.
class CpuMask {
 public:
  explicit CpuMask(const std::vector<int>& cpus) {
    if (cpus.empty()) {
      return;
    }
    const int highest = *std::max_element(cpus.begin(), cpus.end());
    if (*std::min_element(cpus.begin(), cpus.end()) < 0) {
      throw SpawnError("cannot bind a child to a negative CPU number", EINVAL);
    }
    mask_ = CPU_ALLOC(highest + 1);
    if (mask_ == nullptr) {
      throw SpawnError("cannot bind a child to its CPUs: CPU_ALLOC", ENOMEM);
    }
    size_ = CPU_ALLOC_SIZE(highest + 1);
    CPU_ZERO_S(size_, mask_);
    for (const int cpu : cpus) {
      CPU_SET_S(cpu, size_, mask_);
    }
  }
  ~CpuMask() {
    if (mask_ != nullptr) {
      CPU_FREE(mask_);
    }
  }
  CpuMask(const CpuMask&) = delete;
  CpuMask& operator=(const CpuMask&) = delete;

  // In the child (one system call, async-signal-safe): 0, or errno.
  int bindThisProcess() const {
    if (mask_ == nullptr) {
      return 0;
    }
    return sched_setaffinity(0, size_, mask_) == 0 ? 0 : errno;
  }

 private:
  cpu_set_t* mask_ = nullptr;
  std::size_t size_ = 0;
};

// Every pid a Subprocess of this process owns and has not reaped.
struct OwnedPids {
  std::mutex mutex;
  std::vector<pid_t> pids;
};

OwnedPids& owned() {
  static OwnedPids registry;
  return registry;
}

void own(pid_t pid) {
  std::lock_guard lock(owned().mutex);
  owned().pids.push_back(pid);
}

void disown(pid_t pid) {
  std::lock_guard lock(owned().mutex);
  std::erase(owned().pids, pid);
}

// What the child needs between clone and exec, all made before the clone.
struct ChildSetup {
  const SpawnOptions& options;
  pid_t parent;
  const char* path;
  ExecArrays& arrays;
  const CpuMask& cpus;
  int error_pipe[2];
};

// Runs in the child between clone and exec (child_start.hpp's ChildEntry),
// with every signal blocked. Never returns.
[[noreturn]] void execChild(void* arg, bool move_to_cgroup) {
  const ChildSetup& setup = *static_cast<const ChildSetup*>(arg);
  const SpawnOptions& options = setup.options;
  const int error_pipe = setup.error_pipe[1];
  close(setup.error_pipe[0]);
  prctl(PR_SET_PDEATHSIG, options.death_signal);
  if (getppid() != setup.parent) {
    _exit(127);  // the agent died before the death signal was armed
  }
  setsid();  // own session and process group: signals reach the worker's children too
  if (options.controlling_terminal_fd >= 0) {
    ioctl(options.controlling_terminal_fd, TIOCSCTTY, 0);
  }
  struct sigaction default_action {};
  default_action.sa_handler = SIG_DFL;
  for (int signal = 1; signal < NSIG; ++signal) {
    if (signal != SIGKILL && signal != SIGSTOP) {
      sigaction(signal, &default_action, nullptr);  // an ignored SIGPIPE would be inherited
    }
  }
  sigset_t none;  // only now: no handler of the agent's is left to run here
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  if (options.stdin_fd >= 0) {
    dup2(options.stdin_fd, STDIN_FILENO);
  }
  if (options.stdout_fd >= 0) {
    dup2(options.stdout_fd, STDOUT_FILENO);
  }
  if (options.stderr_fd >= 0) {
    dup2(options.stderr_fd, STDERR_FILENO);
  }
  if (move_to_cgroup) {
    const int procs = openat(options.cgroup_fd, "cgroup.procs", O_WRONLY | O_CLOEXEC);
    [[maybe_unused]] ssize_t moved = write(procs, "0", 1);
  }
  if (const int error = setup.cpus.bindThisProcess(); error != 0) {
    const int failure = -error;  // negative: the CPU binding failed, not exec
    [[maybe_unused]] ssize_t written = write(error_pipe, &failure, sizeof(failure));
    _exit(127);
  }
  // Nothing of the agent's leaks into the worker; the error pipe (already
  // close-on-exec) stays open until exec succeeds.
  syscall(SYS_close_range, 3U, ~0U, CLOSE_RANGE_CLOEXEC);
  execve(setup.path, setup.arrays.argv(), setup.arrays.envp());
  const int error = errno;
  [[maybe_unused]] ssize_t written = write(error_pipe, &error, sizeof(error));
  _exit(127);
}

}  // namespace

ExitStatus ExitStatus::fromWaitStatus(int status) {
  if (WIFSIGNALED(status)) {
    return {Kind::Signaled, WTERMSIG(status)};
  }
  return {Kind::Exited, WEXITSTATUS(status)};
}

std::string signalName(int signal) {
  const char* name = sigabbrev_np(signal);
  return name != nullptr ? "SIG" + std::string(name) : "signal " + std::to_string(signal);
}

std::string ExitStatus::describe() const {
  if (kind == Kind::Exited) {
    return "exited with code " + std::to_string(code);
  }
  const char* name = sigabbrev_np(code);
  return "killed by " + (name != nullptr ? "SIG" + std::string(name) : std::string("a signal")) +
         " (signal " + std::to_string(code) + ")";
}

std::vector<std::pair<std::string, std::string>> inheritedEnvironment() {
  std::vector<std::pair<std::string, std::string>> variables;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const std::string text = *entry;
    const auto equals = text.find('=');
    if (equals != std::string::npos) {
      variables.emplace_back(text.substr(0, equals), text.substr(equals + 1));
    }
  }
  return variables;
}

std::optional<ExitStatus> runWithin(const SpawnOptions& options,
                                    std::chrono::milliseconds deadline) {
  std::optional<Subprocess> child;
  try {
    child.emplace(options);
  } catch (const SpawnError&) {
    return std::nullopt;
  }
  return child->waitFor(deadline);  // past it: killed and reaped by ~Subprocess
}

Subprocess::Subprocess(const SpawnOptions& options) {
  if (options.argv.empty()) {
    throw SpawnError("cannot run a worker with an empty command line", EINVAL);
  }
  const std::string& program = options.argv.front();
  const auto path = findExecutable(program, pathFor(options));
  if (!path) {
    throw SpawnError("cannot run '" + program + "' (looked for on PATH)", ENOENT);
  }
  ExecArrays arrays(options);
  const CpuMask cpus(options.cpu_affinity);
  int error_pipe[2];
  if (pipe2(error_pipe, O_CLOEXEC) != 0) {
    throw SpawnError("cannot run '" + program + "': pipe", errno);
  }
  ChildSetup setup{options, getpid(), path->c_str(), arrays, cpus, {error_pipe[0], error_pipe[1]}};
  pid_ = detail::startChild(options.cgroup_fd, execChild, &setup);
  const int fork_error = errno;
  close(error_pipe[1]);
  if (pid_ < 0) {
    close(error_pipe[0]);
    throw SpawnError("cannot run '" + program + "': fork", fork_error);
  }
  int exec_error = 0;
  ssize_t got = 0;
  do {
    got = read(error_pipe[0], &exec_error, sizeof(exec_error));
  } while (got < 0 && errno == EINTR);
  close(error_pipe[0]);
  if (got == static_cast<ssize_t>(sizeof(exec_error))) {
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
    if (exec_error < 0) {
      throw SpawnError("cannot bind '" + program + "' to its CPUs: sched_setaffinity", -exec_error);
    }
    throw SpawnError("cannot run '" + *path + "'", exec_error);
  }
  own(pid_);
  pidfd_ = static_cast<int>(syscall(SYS_pidfd_open, pid_, 0));
  if (pidfd_ < 0 && errno != ENOSYS) {
    const int pidfd_error = errno;  // out of descriptors, most likely
    killpg(pid_, SIGKILL);
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    const pid_t pid = std::exchange(pid_, -1);
    throw SpawnError("cannot watch '" + program + "' (pid " + std::to_string(pid) + "): pidfd_open",
                     pidfd_error);
  }
}

Subprocess::Subprocess(Subprocess&& other) noexcept
    : pid_(std::exchange(other.pid_, -1)),
      pidfd_(std::exchange(other.pidfd_, -1)),
      status_(other.status_) {}

Subprocess::~Subprocess() {
  if (pid_ > 0 && !status_) {
    killNow();
    waitpid(pid_, nullptr, 0);
    disown(pid_);
  }
  if (pidfd_ >= 0) {
    close(pidfd_);
  }
}

void Subprocess::killAndAbandon() {
  if (pid_ > 0 && !status_) {
    killNow();
    disown(std::exchange(pid_, -1));
  }
}

void Subprocess::killNow() const {
  killpg(pid_, SIGKILL);
  kill(pid_, SIGKILL);  // in case it left its group
}

bool Subprocess::signalGroup(int signal) const {
  if (pid_ <= 0 || status_) {
    return false;
  }
  return killpg(pid_, signal) == 0 || kill(pid_, signal) == 0;
}

ExitStatus Subprocess::waitAndKillGroup() {
  if (status_) {
    return *status_;
  }
  if (pid_ <= 0) {
    throw std::logic_error("waitAndKillGroup() on a Subprocess that owns no child");
  }
  siginfo_t info{};
  while (waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOWAIT) != 0) {
    if (errno != EINTR) {
      throw Error("cannot wait for pid " + std::to_string(pid_) + ": " + std::strerror(errno));
    }
  }
  // A session leader cannot leave its group, and its zombie keeps the id.
  killpg(pid_, SIGKILL);
  return wait();
}

std::vector<pid_t> Subprocess::ownedPids() {
  std::lock_guard lock(owned().mutex);
  return owned().pids;
}

void Subprocess::reaped(int wait_status) {
  status_ = ExitStatus::fromWaitStatus(wait_status);
  disown(pid_);
}

std::optional<ExitStatus> Subprocess::tryWait() {
  if (status_ || pid_ <= 0) {
    return status_;
  }
  int status = 0;
  if (waitpid(pid_, &status, WNOHANG) == pid_) {
    reaped(status);
  }
  return status_;
}

ExitStatus Subprocess::wait() {
  while (!status_) {
    int status = 0;
    const pid_t got = waitpid(pid_, &status, 0);
    if (got == pid_) {
      reaped(status);
    } else if (got < 0 && errno != EINTR) {
      throw Error("cannot wait for worker pid " + std::to_string(pid_) + ": " +
                  std::strerror(errno));
    }
  }
  return *status_;
}

std::optional<ExitStatus> Subprocess::waitFor(std::chrono::milliseconds timeout) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + timeout;
  while (pid_ > 0 && !tryWait()) {
    // Rounded up: a poll of 0 ms short of the deadline would spin.
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) {
      break;
    }
    if (pidfd_ >= 0) {
      pollfd exit_watch{pidfd_, POLLIN, 0};
      // Readable once the child has exited; EINTR or not, tryWait looks again.
      poll(&exit_watch, 1, static_cast<int>(std::min<long long>(left.count(), INT_MAX)));
    } else {
      std::this_thread::sleep_for(std::min(left, std::chrono::milliseconds(1)));
    }
  }
  return status_;
}

ExitStatus Subprocess::stop(std::chrono::milliseconds grace) {
  if (pid_ <= 0) {
    throw std::logic_error("stop() on a Subprocess that owns no child");
  }
  if (const auto status = tryWait()) {
    return *status;
  }
  signalGroup(SIGTERM);
  if (const auto status = waitFor(grace)) {
    return *status;
  }
  signalGroup(SIGKILL);
  return wait();
}

}  // namespace ddprun::launcher

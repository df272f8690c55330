// One child process, spawned for supervision: its own session and process
// group (with a controlling terminal if asked), killed
// by the kernel if the agent dies (PR_SET_PDEATHSIG), signal mask and
// dispositions reset, every other descriptor closed, and a pidfd so an event
// loop can wait for its exit without polling or SIGCHLD races.
//
// The one process helper of the project: the agent spawns its workers with
// it, and the tests and benchmarks their daemons, agents and servers.
//
// Owns the pid (reaped in wait()/tryWait()/waitFor()/stop()/
// waitAndKillGroup(), or killed and reaped by the destructor: no zombies, no
// orphans) and the pidfd. Not thread-safe: signal, wait and destroy from one
// thread (the agent's supervision thread; a test's or a benchmark's main
// thread). Every pid a Subprocess owns and has not reaped is listed, process
// wide, in ownedPids(), so code that reaps children it does not own (the
// agent's ProcessTree) can leave them alone.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ddprun/proto/errors.hpp"

namespace ddprun::launcher {

// How a child ended: exited with a code, or killed by a signal.
struct ExitStatus {
  enum class Kind { Exited, Signaled };
  Kind kind = Kind::Exited;
  int code = 0;  // exit code, or signal number

  static ExitStatus fromWaitStatus(int status);
  bool success() const { return kind == Kind::Exited && code == 0; }
  // The shell's convention: the exit code, or 128 + signal.
  int shellCode() const { return kind == Kind::Exited ? code : 128 + code; }
  // "exited with code 3", "killed by SIGSEGV (signal 11)".
  std::string describe() const;
  bool operator==(const ExitStatus&) const = default;
};

// "SIGTERM", or "signal 34" for a signal with no abbreviation.
std::string signalName(int signal);

// A child could not be started. what() is "<what failed>: <errno's text>"
// ("cannot run 'train': fork: Resource temporarily unavailable"), so every
// spawn error says why; errorNumber() keeps the errno.
class SpawnError : public Error {
 public:
  SpawnError(const std::string& what_failed, int error_number)
      : Error(what_failed + ": " + std::strerror(error_number)), error_number_(error_number) {}
  int errorNumber() const { return error_number_; }

 private:
  int error_number_;
};

struct SpawnOptions {
  std::vector<std::string> argv;  // argv[0] is looked up on PATH if it has no '/'
  std::vector<std::pair<std::string, std::string>> env;  // the child's whole environment
  int stdin_fd = -1;     // dup2'ed to 0 when >= 0; otherwise inherited
  int stdout_fd = -1;    // dup2'ed to 1 when >= 0; otherwise inherited
  int stderr_fd = -1;    // dup2'ed to 2 when >= 0; otherwise inherited
  int death_signal = 9;  // sent to the child when the agent's thread that spawned it dies
  // When >= 0, an open cgroup v2 directory the child starts in (clone3's
  // CLONE_INTO_CGROUP); where clone3 is refused (seccomp), the child moves in
  // before exec. If neither works, the child stays in this process's cgroup.
  int cgroup_fd = -1;
  // When not empty, the CPUs (logical CPU numbers) the child is bound to
  // before exec (sched_setaffinity); its threads and children inherit them.
  std::vector<int> cpu_affinity;
  // When >= 0, a terminal (a pseudo-terminal's slave) that becomes the
  // controlling terminal of the child's new session, so the kernel sends
  // the child SIGWINCH when it is resized. The child's process group is then
  // the terminal's foreground group: when the child exits, what is left of
  // its group gets SIGHUP from the kernel.
  int controlling_terminal_fd = -1;
};

// This process's own environment, as SpawnOptions::env wants it: for a child
// that should inherit everything (a daemon under test, a benchmark's server).
std::vector<std::pair<std::string, std::string>> inheritedEnvironment();

// Runs a short-lived helper to its end (a probe, an analyser): its exit
// status, or nullopt if it could not start or was still running at
// `deadline` (then its group is killed and it is reaped). The caller keeps
// and closes the descriptors it put in `options`.
std::optional<ExitStatus> runWithin(const SpawnOptions& options,
                                    std::chrono::milliseconds deadline);

class Subprocess {
 public:
  // Starts the child; throws SpawnError (e.g. "cannot run 'train': No such
  // file or directory") if fork or exec fails.
  explicit Subprocess(const SpawnOptions& options);
  ~Subprocess();
  Subprocess(Subprocess&& other) noexcept;
  Subprocess& operator=(Subprocess&&) = delete;
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;

  pid_t pid() const { return pid_; }
  // Readable once the child has exited (for an event loop); -1 if the kernel
  // has no pidfd_open. (Any other pidfd_open failure, such as running out of
  // descriptors, is a SpawnError: the child is killed and reaped.)
  int pidfd() const { return pidfd_; }

  // Sends `signal` to the child's whole process group; false once the child
  // has been reaped (its group's id may then belong to another group).
  bool signalGroup(int signal) const;
  // Blocks until the child exits, SIGKILLs what is left of its process group
  // while the unreaped child still holds the group's id (so no other group
  // can have it yet), then reaps the child: nothing of the group outlives it.
  ExitStatus waitAndKillGroup();
  // Reaps the child if it has exited.
  std::optional<ExitStatus> tryWait();
  // Blocks until the child exits and reaps it.
  ExitStatus wait();
  // Waits up to `timeout` for the child to exit (on the pidfd, or polling
  // where there is none) and reaps it; nullopt if it still runs.
  std::optional<ExitStatus> waitFor(std::chrono::milliseconds timeout);
  // Asks the whole group to stop (SIGTERM), SIGKILLs the group if the child
  // has not exited after `grace`, and reaps it. Returns how it ended; at once
  // if it already had.
  ExitStatus stop(std::chrono::milliseconds grace);
  std::optional<ExitStatus> exitStatus() const { return status_; }
  // SIGKILLs the group and gives the child up unreaped, for a child that
  // may be stuck in the kernel (a hung driver's ioctl), where the blocking
  // reap of ~Subprocess could wait for ever. It stays a zombie until this
  // process, or the subreaper above it, reaps it or exits.
  void killAndAbandon();

  // The children of this process that a Subprocess owns and has not reaped.
  // Any thread.
  static std::vector<pid_t> ownedPids();

 private:
  void reaped(int wait_status);
  void killNow() const;  // SIGKILL to its group and to it, unreaped

  pid_t pid_ = -1;
  int pidfd_ = -1;
  std::optional<ExitStatus> status_;
};

}  // namespace ddprun::launcher

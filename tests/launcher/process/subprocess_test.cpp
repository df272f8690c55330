// Subprocess with real processes and signals: exit codes, signals, exec
// failures, the exact environment, own session (with a controlling terminal
// when asked), reset signal dispositions,
// no orphan after the agent is SIGKILLed, the pidfd, waits with a timeout,
// stopping with a grace period, a group killed before its leader is reaped,
// the owned pids, and no zombie left.
#include "ddprun/launcher/process/subprocess.hpp"

#include <gtest/gtest.h>
#include <poll.h>
#include <pty.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "ddprun/launcher/process/executable_path.hpp"

namespace ddprun::launcher {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

SpawnOptions shell(const std::string& script) {
  SpawnOptions options;
  options.argv = {"/bin/sh", "-c", script};
  options.env = {{"PATH", "/usr/bin:/bin"}};
  return options;
}

TEST(SubprocessTest, ReportsExitCodes) {
  EXPECT_EQ(Subprocess(shell("exit 0")).wait(), (ExitStatus{ExitStatus::Kind::Exited, 0}));
  Subprocess three(shell("exit 3"));
  const ExitStatus status = three.wait();
  EXPECT_EQ(status.code, 3);
  EXPECT_EQ(status.shellCode(), 3);
  EXPECT_EQ(status.describe(), "exited with code 3");
}

TEST(SubprocessTest, ReportsTheKillingSignalByName) {
  const ExitStatus status = Subprocess(shell("kill -SEGV $$")).wait();
  EXPECT_EQ(status.kind, ExitStatus::Kind::Signaled);
  EXPECT_EQ(status.code, SIGSEGV);
  EXPECT_EQ(status.shellCode(), 128 + SIGSEGV);
  EXPECT_EQ(status.describe(), "killed by SIGSEGV (signal 11)");
}

TEST(SubprocessTest, MissingOrUnrunnableProgramIsASpawnErrorNamingIt) {
  SpawnOptions missing;
  missing.argv = {"ddprun-no-such-program"};
  try {
    Subprocess child(missing);
    FAIL() << "spawned a program that does not exist";
  } catch (const SpawnError& error) {
    EXPECT_EQ(error.errorNumber(), ENOENT);
    EXPECT_NE(std::string(error.what()).find("ddprun-no-such-program"), std::string::npos);
  }
  SpawnOptions directory;
  directory.argv = {"/tmp"};  // exists, but execve refuses it
  EXPECT_THROW(Subprocess child(directory), SpawnError);
}

// Runs `options` with its stdout on a pipe; what it wrote and how it ended.
std::pair<std::string, ExitStatus> runForOutput(SpawnOptions options) {
  int out[2];
  if (pipe(out) != 0) {
    return {"pipe failed", ExitStatus{}};
  }
  options.stdout_fd = out[1];
  Subprocess child(options);
  close(out[1]);
  std::string text;
  char buffer[256];
  for (ssize_t got; (got = read(out[0], buffer, sizeof(buffer))) > 0;) {
    text.append(buffer, static_cast<std::size_t>(got));
  }
  close(out[0]);
  const ExitStatus status = child.wait();
  return {text, status};
}

TEST(SubprocessTest, ChildSeesExactlyTheGivenEnvironment) {
  SpawnOptions options;
  options.argv = {"/usr/bin/env"};
  options.env = {{"RANK", "3"}, {"EMPTY", ""}};
  const auto [text, status] = runForOutput(options);
  EXPECT_TRUE(status.success());
  EXPECT_EQ(text, "RANK=3\nEMPTY=\n");
}

// What the child's /proc/self/status says of the CPUs it may run on.
std::string cpusAllowedInChild(const std::vector<int>& cpu_affinity) {
  SpawnOptions options = shell("grep Cpus_allowed_list: /proc/self/status");
  options.cpu_affinity = cpu_affinity;
  return runForOutput(options).first;
}

TEST(SubprocessTest, ChildIsBoundToTheGivenCpusBeforeExec) {
  cpu_set_t own;
  ASSERT_EQ(sched_getaffinity(0, sizeof(own), &own), 0);
  int last = -1;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &own)) {
      last = cpu;
    }
  }
  ASSERT_GE(last, 0);
  EXPECT_EQ(cpusAllowedInChild({last}), "Cpus_allowed_list:\t" + std::to_string(last) + "\n");
  // Without a binding the child keeps this process's CPUs.
  std::ifstream status("/proc/self/status");
  std::string own_line;
  while (std::getline(status, own_line) && own_line.rfind("Cpus_allowed_list:", 0) != 0) {
  }
  EXPECT_EQ(cpusAllowedInChild({}), own_line + "\n");
}

TEST(SubprocessTest, ACpuBindingTheKernelRefusesIsASpawnErrorSayingSo) {
  SpawnOptions options = shell("exit 0");
  options.cpu_affinity = {1 << 20};  // no machine has this CPU: EINVAL
  try {
    Subprocess child(options);
    FAIL() << "spawned a child bound to a CPU that does not exist";
  } catch (const SpawnError& error) {
    EXPECT_EQ(error.errorNumber(), EINVAL);
    EXPECT_EQ(std::string(error.what()),
              "cannot bind '/bin/sh' to its CPUs: sched_setaffinity: Invalid argument");
  }
  EXPECT_TRUE(Subprocess::ownedPids().empty());  // the child that could not run is reaped
}

TEST(SubprocessTest, ChildLeadsItsOwnSessionAndGroupSignalsReachIt) {
  Subprocess child(shell("sleep 30"));
  EXPECT_EQ(getpgid(child.pid()), child.pid());
  EXPECT_EQ(getsid(child.pid()), child.pid());
  ASSERT_TRUE(child.signalGroup(SIGTERM));
  EXPECT_EQ(child.wait(), (ExitStatus{ExitStatus::Kind::Signaled, SIGTERM}));
  EXPECT_FALSE(child.signalGroup(SIGTERM));  // reaped: never signals a recycled pid
}

// /dev/tty opens only in a process that has a controlling terminal.
TEST(SubprocessTest, ChildTakesTheTerminalItIsGivenAsItsControllingTerminal) {
  int master = -1;
  int slave = -1;
  ASSERT_EQ(openpty(&master, &slave, nullptr, nullptr, nullptr), 0);
  SpawnOptions options = shell("exec 3</dev/tty");
  options.stdout_fd = slave;
  EXPECT_NE(Subprocess(options).wait().code, 0) << "no controlling terminal unless asked";
  options.controlling_terminal_fd = slave;
  EXPECT_EQ(Subprocess(options).wait(), (ExitStatus{ExitStatus::Kind::Exited, 0}));
  close(slave);
  close(master);
}

TEST(SubprocessTest, AgentsIgnoredAndBlockedSignalsAreResetInTheChild) {
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  struct sigaction previous {};
  sigaction(SIGTERM, &ignore, &previous);
  sigset_t block;
  sigemptyset(&block);
  sigaddset(&block, SIGTERM);
  sigset_t old_mask;
  sigprocmask(SIG_BLOCK, &block, &old_mask);
  Subprocess child(shell("kill -TERM $$; exit 7"));
  const ExitStatus status = child.wait();
  sigprocmask(SIG_SETMASK, &old_mask, nullptr);
  sigaction(SIGTERM, &previous, nullptr);
  EXPECT_EQ(status, (ExitStatus{ExitStatus::Kind::Signaled, SIGTERM}));
}

// The child starts with every signal blocked (child_start.hpp); the caller's
// own mask is as it was once the spawn returns.
TEST(SubprocessTest, SpawningLeavesTheCallersSignalMaskAsItWas) {
  sigset_t usr1;
  sigemptyset(&usr1);
  sigaddset(&usr1, SIGUSR1);
  sigset_t before;
  pthread_sigmask(SIG_BLOCK, &usr1, &before);
  sigset_t during;
  pthread_sigmask(SIG_SETMASK, nullptr, &during);
  Subprocess child(shell("exit 0"));
  sigset_t after;
  pthread_sigmask(SIG_SETMASK, nullptr, &after);
  pthread_sigmask(SIG_SETMASK, &before, nullptr);
  EXPECT_EQ(child.wait(), (ExitStatus{ExitStatus::Kind::Exited, 0}));
  for (int signal = 1; signal < NSIG; ++signal) {
    EXPECT_EQ(sigismember(&after, signal), sigismember(&during, signal)) << "signal " << signal;
  }
}

// Children that share the parent's memory until exec, started from several
// threads at once: each runs its own command line to its own exit code.
TEST(SubprocessTest, ThreadsSpawningAtOnceEachGetTheirOwnChild) {
  constexpr int kThreads = 4;
  constexpr int kEach = 25;
  std::vector<std::vector<int>> codes(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([t, &codes] {
      for (int i = 0; i < kEach; ++i) {
        const int code = (t * kEach + i) % 200;
        codes[t].push_back(Subprocess(shell("exit " + std::to_string(code))).wait().code);
      }
    });
  }
  for (auto& thread : threads) {
    thread.join();
  }
  for (int t = 0; t < kThreads; ++t) {
    ASSERT_EQ(codes[t].size(), static_cast<std::size_t>(kEach));
    for (int i = 0; i < kEach; ++i) {
      EXPECT_EQ(codes[t][i], (t * kEach + i) % 200) << "thread " << t << ", child " << i;
    }
  }
}

// The agent is SIGKILLed: the kernel's parent-death signal kills the worker.
// This test process becomes a subreaper so the orphan is reparented to it
// and its fate can be read with waitpid instead of guessed.
TEST(SubprocessTest, WorkerDiesWhenTheAgentIsKilled) {
  ASSERT_EQ(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
  int report[2];
  ASSERT_EQ(pipe(report), 0);
  const pid_t agent = fork();
  ASSERT_GE(agent, 0);
  if (agent == 0) {
    // exec: the death signal is the direct child's; a shell would fork sleep as a
    // grandchild, which the kernel does not cover.
    Subprocess worker(shell("exec sleep 60"));
    const pid_t pid = worker.pid();
    [[maybe_unused]] ssize_t written = write(report[1], &pid, sizeof(pid));
    pause();
    _exit(0);
  }
  close(report[1]);
  pid_t worker = -1;
  ASSERT_EQ(read(report[0], &worker, sizeof(worker)), static_cast<ssize_t>(sizeof(worker)));
  close(report[0]);
  ASSERT_EQ(kill(agent, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(waitpid(agent, &status, 0), agent);
  ASSERT_EQ(waitpid(worker, &status, 0), worker) << "the worker was not reparented to us";
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), SIGKILL);
  prctl(PR_SET_CHILD_SUBREAPER, 0);
}

TEST(SubprocessTest, PidfdBecomesReadableExactlyWhenTheChildExits) {
  Subprocess sleeper(shell("sleep 30"));
  if (sleeper.pidfd() < 0) {
    GTEST_SKIP() << "this kernel has no pidfd_open";
  }
  pollfd waiting{sleeper.pidfd(), POLLIN, 0};
  EXPECT_EQ(poll(&waiting, 1, 50), 0);
  ASSERT_TRUE(sleeper.signalGroup(SIGKILL));
  EXPECT_EQ(poll(&waiting, 1, 10'000), 1);
  EXPECT_EQ(sleeper.tryWait(), (ExitStatus{ExitStatus::Kind::Signaled, SIGKILL}));
}

TEST(SubprocessTest, DestructorKillsAndReapsARunningChild) {
  pid_t pid = -1;
  {
    Subprocess child(shell("sleep 30"));
    pid = child.pid();
  }
  EXPECT_EQ(waitpid(pid, nullptr, WNOHANG), -1);
  EXPECT_EQ(errno, ECHILD);  // already reaped: no zombie
  EXPECT_EQ(kill(pid, 0), -1);
}

TEST(SubprocessTest, WaitForGivesUpAfterTheTimeoutAndReapsOnceTheChildExits) {
  Subprocess sleeper(shell("sleep 30"));
  const auto start = Clock::now();
  EXPECT_FALSE(sleeper.waitFor(milliseconds(100)).has_value());
  EXPECT_GE(Clock::now() - start, milliseconds(100));
  ASSERT_TRUE(sleeper.signalGroup(SIGKILL));
  EXPECT_EQ(sleeper.waitFor(milliseconds(10'000)),
            (ExitStatus{ExitStatus::Kind::Signaled, SIGKILL}));
  EXPECT_EQ(sleeper.exitStatus(), (ExitStatus{ExitStatus::Kind::Signaled, SIGKILL}));
}

TEST(SubprocessTest, WaitForReturnsAsSoonAsTheChildExits) {
  Subprocess quick(shell("exit 4"));
  const auto start = Clock::now();
  EXPECT_EQ(quick.waitFor(milliseconds(60'000)), (ExitStatus{ExitStatus::Kind::Exited, 4}));
  EXPECT_LT(Clock::now() - start, milliseconds(10'000));
  EXPECT_EQ(quick.waitFor(milliseconds(0)), (ExitStatus{ExitStatus::Kind::Exited, 4}));
}

TEST(SubprocessTest, StopEndsAChildThatHeedsSigtermWithoutWaitingOutTheGrace) {
  Subprocess child(shell("exec sleep 30"));
  const auto start = Clock::now();
  EXPECT_EQ(child.stop(milliseconds(60'000)), (ExitStatus{ExitStatus::Kind::Signaled, SIGTERM}));
  EXPECT_LT(Clock::now() - start, milliseconds(10'000));
  // Idempotent: the first result, and no signal to a pid that may be reused.
  EXPECT_EQ(child.stop(milliseconds(0)), (ExitStatus{ExitStatus::Kind::Signaled, SIGTERM}));
}

TEST(SubprocessTest, StopKillsAChildThatIgnoresSigtermAfterTheGrace) {
  // The ignored SIGTERM survives exec, so sleep itself ignores it.
  Subprocess stubborn(shell("trap '' TERM; exec sleep 30"));
  ASSERT_FALSE(stubborn.waitFor(milliseconds(200)).has_value());  // the trap is set by now
  const auto start = Clock::now();
  EXPECT_EQ(stubborn.stop(milliseconds(300)), (ExitStatus{ExitStatus::Kind::Signaled, SIGKILL}));
  EXPECT_GE(Clock::now() - start, milliseconds(300));
}

// A shell running `script`, which starts a process and prints its pid; the
// pid is 0 if none came.
struct ParentAndGrandchild {
  Subprocess parent;
  pid_t grandchild;
};

ParentAndGrandchild startWithGrandchild(const std::string& script) {
  int out[2];
  EXPECT_EQ(pipe(out), 0);
  SpawnOptions options = shell(script);
  options.stdout_fd = out[1];
  Subprocess parent(options);
  close(out[1]);
  char buffer[32] = {};
  const bool got = read(out[0], buffer, sizeof(buffer) - 1) > 0;
  close(out[0]);
  return {std::move(parent), got ? static_cast<pid_t>(std::atoi(buffer)) : 0};
}

// The whole group is told, so a launcher's own children hear SIGTERM too.
// A subreaper again, to reap the grandchild and read how it ended.
TEST(SubprocessTest, StopSignalsTheChildsWholeProcessGroup) {
  ASSERT_EQ(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
  auto [parent, grandchild] = startWithGrandchild("sleep 30 & echo $!; wait");
  ASSERT_GT(grandchild, 0);
  EXPECT_EQ(parent.stop(milliseconds(10'000)), (ExitStatus{ExitStatus::Kind::Signaled, SIGTERM}));
  int status = 0;
  ASSERT_EQ(waitpid(grandchild, &status, 0), grandchild);
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), SIGTERM);
  prctl(PR_SET_CHILD_SUBREAPER, 0);
}

// A child that exits leaving a process in its group: the group is SIGKILLed
// before the child is reaped, while its zombie still holds the group's id.
TEST(SubprocessTest, WaitAndKillGroupLeavesNothingOfTheGroup) {
  ASSERT_EQ(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
  auto [parent, grandchild] = startWithGrandchild("sleep 30 & echo $!; exit 3");
  ASSERT_GT(grandchild, 0);
  EXPECT_EQ(parent.waitAndKillGroup(), (ExitStatus{ExitStatus::Kind::Exited, 3}));
  int status = 0;
  ASSERT_EQ(waitpid(grandchild, &status, 0), grandchild);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  EXPECT_EQ(parent.waitAndKillGroup(), (ExitStatus{ExitStatus::Kind::Exited, 3}));  // once only
  prctl(PR_SET_CHILD_SUBREAPER, 0);
}

TEST(SubprocessTest, OwnedPidsListsTheChildrenNotYetReaped) {
  Subprocess child(shell("exit 0"));
  const auto before = Subprocess::ownedPids();
  EXPECT_NE(std::find(before.begin(), before.end(), child.pid()), before.end());
  child.wait();
  const auto after = Subprocess::ownedPids();
  EXPECT_EQ(std::find(after.begin(), after.end(), child.pid()), after.end());
}

TEST(SubprocessTest, InheritedEnvironmentSplitsAtTheFirstEqualsSign) {
  ASSERT_EQ(setenv("DDPRUN_SUBPROCESS_TEST", "a=b", 1), 0);
  const auto variables = inheritedEnvironment();
  unsetenv("DDPRUN_SUBPROCESS_TEST");
  const auto found = std::find_if(variables.begin(), variables.end(), [](const auto& variable) {
    return variable.first == "DDPRUN_SUBPROCESS_TEST";
  });
  ASSERT_NE(found, variables.end());
  EXPECT_EQ(found->second, "a=b");
}

TEST(SubprocessTest, FindExecutableSearchesPathInOrder) {
  EXPECT_EQ(findExecutable("sh", "/nonexistent:/bin"), "/bin/sh");
  EXPECT_EQ(findExecutable("./relative/thing", "/bin"), "./relative/thing");
  EXPECT_FALSE(findExecutable("ddprun-no-such-program", "/usr/bin:/bin").has_value());
  EXPECT_FALSE(findExecutable("tmp", "/").has_value());  // a directory is not a program
}

}  // namespace
}  // namespace ddprun::launcher

// ProcessTree: the agent's hold on everything its workers start, so that no
// process outlives its attempt. It makes the agent a child subreaper: what a
// worker leaves behind (a child that called setsid, a double-forked daemon,
// the rest of a dead worker's tree) becomes the agent's child instead of
// init's. Then:
//   - when a worker exits, the rest of its process group is SIGKILLed before
//     the worker is reaped (Subprocess::waitAndKillGroup);
//   - when every worker of an attempt has exited (before a restart, and at
//     the end of the run), everything left is killed and reaped: the job's
//     cgroup through cgroup.kill where there is one, then every child of the
//     agent that no Subprocess owns, and theirs as they become the agent's;
//   - orphans that exit on their own meanwhile are reaped every 2 s;
//   - when ddprun's guardian dies (`kill -9` of ddprun's pid, guardian.hpp),
//     it SIGKILLs every descendant at once, workers included, and ends the
//     agent as that SIGKILL would have before there was a guardian: at once,
//     its connections closed by its death.
// Each kill is one log line: how many processes, and by which mechanism.
// Children a Subprocess owns (the workers, any helper) are never signalled or
// reaped here: their owner does that, so nothing races with it.
//
// Runs on the agent's loop thread. killOrphans() also runs in the guardian.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ddprun/launcher/process/subprocess.hpp"
#include "ddprun/launcher/supervision/exit_watch.hpp"
#include "ddprun/net/asio.hpp"

namespace ddprun::launcher {

class WorkerCgroup;

struct KillCount {
  int killed = 0;  // processes alive when SIGKILLed
  // Those killed but not dead by the deadline, left unreaped: a SIGKILLed
  // process that lives on is stuck in the kernel (uninterruptible sleep).
  std::vector<pid_t> still_alive;
};

// How long what the workers left gets to die after its SIGKILL before the
// agent, or the guardian, goes on without it.
inline constexpr std::chrono::seconds kLeftoverWait{5};

// SIGKILLs and reaps every child of this process that no Subprocess owns,
// then those they leave behind as they die (this process must be a child
// subreaper), until none is left or `deadline` passes. Only ever signals its
// own unreaped children, so never a recycled pid.
KillCount killOrphans(std::chrono::steady_clock::time_point deadline);

// What killEverythingLeft() did.
struct LeftoverKill {
  int by_cgroup = 0;  // processes the job's cgroups held
  KillCount orphans;  // then the orphans left
  int killed() const { return by_cgroup + orphans.killed; }
  // "child subreaper", "cgroup.kill" or "cgroup.kill, then child subreaper".
  std::string mechanism() const;
};

// Kills and reaps all the workers left, until `deadline`: the job's cgroups
// through cgroup.kill (`cgroup` may be null), then killOrphans(). Used by
// the agent at the end of each attempt and by the guardian at the end; each
// says what it does with those still alive.
LeftoverKill killEverythingLeft(WorkerCgroup* cgroup,
                                std::chrono::steady_clock::time_point deadline);

class ProcessTree {
 public:
  // Makes this process a child subreaper until destroyed.
  // `reap_every`: how often orphans that exited on their own are reaped.
  explicit ProcessTree(net::asio::io_context& io,
                       std::chrono::milliseconds reap_every = std::chrono::seconds(2));
  ~ProcessTree();
  ProcessTree(const ProcessTree&) = delete;
  ProcessTree& operator=(const ProcessTree&) = delete;

  // The job's cgroup the workers join (borrowed; null: none), once known:
  // before the first worker starts. Until then there is none to kill.
  void adoptCgroup(WorkerCgroup* cgroup) { cgroup_ = cgroup; }
  // The job's cgroup a new worker starts in (SpawnOptions::cgroup_fd); -1: none.
  int cgroupFd();
  // Until finish(): reaps orphans that exit on their own every `reap_every`, and
  // watches ddprun's guardian (`guardian_pidfd`, borrowed, is readable once
  // it has died; -1: no guardian). `last_word` runs once the guardian's
  // death has killed the workers, right before the agent exits.
  void start(int guardian_pidfd, std::function<void()> last_word = {});
  // For a worker whose pidfd says it has exited: kills the rest of its
  // process group, reaps it, and says so if anything was killed.
  ExitStatus reapWorker(Subprocess& worker, int local_rank);
  // The run is over: kills and reaps all that is left (waiting up to `wait`
  // for it to die, and saying how many outlive it), removes the job's
  // cgroup, and stops watching.
  void finish(int attempt, std::chrono::milliseconds wait = kLeftoverWait);
  // Every worker has exited: kills and reaps all that is left, waiting up
  // to `wait` for it to die; what it did, with what still lives.
  LeftoverKill killLeftovers(int attempt, std::chrono::milliseconds wait = kLeftoverWait);

 private:
  void reapLater();
  [[noreturn]] void onGuardianGone();

  net::asio::steady_timer reap_timer_;
  std::chrono::milliseconds reap_every_;
  // Set by finish(): a reap already due when the timer was cancelled runs
  // anyway, and must not arm it again (the loop would never end).
  bool finished_ = false;
  net::asio::io_context& io_;
  std::unique_ptr<ExitWatch> guardian_watch_;  // on the kernel's word only
  std::function<void()> last_word_;
  WorkerCgroup* cgroup_ = nullptr;
  int was_subreaper_ = 0;
};

}  // namespace ddprun::launcher

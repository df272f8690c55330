// ddprun's guardian: so that nothing outlives the job even when the agent is
// SIGKILLed. ddprun forks once it knows it will run a job; the child goes on
// as the agent, and the process ddprun was started as (the pid the user, a
// shell's $!, Slurm or systemd see) stays behind as the guardian, a child
// subreaper that only:
//   - forwards to the agent every signal it gets, except those a terminal
//     sends to its whole foreground process group (Ctrl-C, Ctrl-\), which
//     the agent, in the same group, got as well; job-control signals keep
//     their default action and stop or continue both;
//   - once the agent has ended, kills and reaps every process left (the
//     job's cgroup through cgroup.kill, then every orphan, which as the
//     nearest subreaper it has inherited), removes the cgroup, says so
//     (naming, with its kernel state, any process its SIGKILL leaves alive),
//     and ends as the agent did: its exit code, or the signal that killed it.
// When the guardian dies (`kill -9` of ddprun's pid), the agent, watching a
// pidfd of it on its loop, SIGKILLs all it started and exits at once, as a
// SIGKILL of ddprun did before (process_tree.hpp). Outside its loop (before
// the workers start, after they are gone) it gets SIGTERM instead
// (PR_SET_PDEATHSIG), when SIGTERM is a signal it handles.
//
// Right after the fork, the guardian makes the job's cgroup and writes the
// agent where it is (GuardianLink), before it starts forwarding signals
// (those that come meanwhile wait, blocked, until it does).
//
// Single-threaded: the guardian is the process before any thread started.
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace ddprun::launcher {

class WorkerCgroup;

// The agent's end of what it shares with its guardian: a pidfd of the
// guardian, and the job's cgroup, which the guardian makes while the agent
// sets itself up (its 0.2 ms of work off the launch's critical path: 0.06 to
// 0.15 ms less, measured). Owned by the agent's main thread.
class GuardianLink {
 public:
  GuardianLink(int pidfd, int cgroup_answer) : pidfd_(pidfd), cgroup_answer_(cgroup_answer) {}
  ~GuardianLink();
  GuardianLink(const GuardianLink&) = delete;
  GuardianLink& operator=(const GuardianLink&) = delete;

  // Readable once the guardian has died; -1 where pidfd_open is refused.
  int pidfd() const { return pidfd_; }
  // The job's cgroup the guardian made, waiting for its answer; nullptr
  // where there is none, and `description` says which: "cgroups <path>-<n>,
  // one per attempt (cgroup.kill)" or "no cgroup (<why not>)". Once.
  std::unique_ptr<WorkerCgroup> jobCgroup(std::string& description);

 private:
  int pidfd_ = -1;
  int cgroup_answer_ = -1;  // the pipe the guardian writes its answer to
};

// Forks the agent, which handles `agent_handles` (--signals-to-handle), and
// returns in it only, ignoring forwardedOnlySignals() until its loop
// forwards them (agent.hpp). The guardian makes the job's cgroup
// (makeJobCgroup) and tells the agent, then never returns: once the agent
// has ended and nothing is left, it exits with the agent's exit code, or
// raises on itself the signal that killed the agent. Throws ddprun::Error
// when it cannot fork.
GuardianLink forkAgentUnderGuardian(const std::vector<int>& agent_handles);

// --stdin-hangup: from now on, stdin reaching its end (the ssh session of a
// --hostfile launch closed, its launching process gone) is a SIGHUP to this
// process, which stops the job as the user's SIGHUP would (SIGTERM, or
// SIGINT, when `handled` lacks SIGHUP). SIGPIPE is ignored, so that a line
// written to the gone session cannot end the agent before it has stopped
// its workers. A detached thread blocks reading stdin (whatever it reads is
// dropped). Call in the agent, after the fork.
void hangUpWhenStdinEnds(const std::vector<int>& handled);

}  // namespace ddprun::launcher

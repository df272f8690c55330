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
// Single-threaded: the guardian is the process before any thread started.
#pragma once

#include <vector>

namespace ddprun::launcher {

class WorkerCgroup;

// Forks the agent, which handles `agent_handles` (--signals-to-handle), and
// returns in it only, with a pidfd of the guardian (readable once the
// guardian has died), ignoring forwardedOnlySignals() until its loop forwards
// them (agent.hpp). The guardian never returns: once the agent has ended
// and nothing is left, it exits with the agent's exit code, or raises on
// itself the signal that killed the agent. `cgroup` may be null. Throws
// ddprun::Error when it cannot fork.
int forkAgentUnderGuardian(WorkerCgroup* cgroup, const std::vector<int>& agent_handles);

// --stdin-hangup: from now on, stdin reaching its end (the ssh session of a
// --hostfile launch closed, its launching process gone) is a SIGHUP to this
// process, which stops the job as the user's SIGHUP would (SIGTERM, or
// SIGINT, when `handled` lacks SIGHUP). SIGPIPE is ignored, so that a line
// written to the gone session cannot end the agent before it has stopped
// its workers. A detached thread blocks reading stdin (whatever it reads is
// dropped). Call in the agent, after the fork.
void hangUpWhenStdinEnds(const std::vector<int>& handled);

}  // namespace ddprun::launcher

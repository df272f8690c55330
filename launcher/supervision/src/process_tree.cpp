#include "ddprun/launcher/supervision/process_tree.hpp"

#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <string>

#include "ddprun/launcher/core/log.hpp"
#include "ddprun/launcher/core/option_values.hpp"
#include "ddprun/launcher/supervision/procfs.hpp"
#include "ddprun/launcher/supervision/worker_cgroup.hpp"

namespace ddprun::launcher {
namespace {

using Clock = std::chrono::steady_clock;

// The children of this process that no Subprocess owns: workers' orphans.
std::vector<pid_t> ownOrphans() {
  std::vector<pid_t> orphans = childrenOf(getpid());
  const std::vector<pid_t> owned = Subprocess::ownedPids();
  std::erase_if(orphans, [&owned](pid_t pid) {
    return std::find(owned.begin(), owned.end(), pid) != owned.end();
  });
  return orphans;
}

// Live processes of group `pgid` among this process's orphans and their
// descendants (a dead worker's group: its children are orphans by now).
int liveMembersOf(pid_t pgid) {
  int members = 0;
  std::vector<pid_t> pending = ownOrphans();
  for (int visited = 0; !pending.empty() && visited < 100'000; ++visited) {
    const pid_t pid = pending.back();
    pending.pop_back();
    const auto state = readProcStat(pid);
    if (state && state->pgrp == pgid && state->state != 'Z') {
      ++members;
    }
    const auto children = childrenOf(pid);
    pending.insert(pending.end(), children.begin(), children.end());
  }
  return members;
}

// Reaps the given children of this process, waiting on pidfds until
// `deadline` for those not dead yet. Returns those still alive.
std::vector<pid_t> reapBy(const std::vector<pid_t>& children, Clock::time_point deadline) {
  std::vector<pid_t> alive;
  for (pid_t child : children) {
    const int pidfd = static_cast<int>(syscall(SYS_pidfd_open, child, 0));
    if (pidfd >= 0) {
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
      pollfd exited{pidfd, POLLIN, 0};
      poll(&exited, 1, static_cast<int>(std::clamp<long long>(left.count(), 0, INT_MAX)));
      close(pidfd);
    }
    if (waitpid(child, nullptr, WNOHANG) == 0) {
      alive.push_back(child);
    }
  }
  return alive;
}

std::string processes(int count) {
  return std::to_string(count) + (count == 1 ? " process" : " processes");
}

}  // namespace

KillCount killOrphans(Clock::time_point deadline) {
  KillCount count;
  for (;;) {
    const std::vector<pid_t> orphans = ownOrphans();
    if (orphans.empty()) {
      return count;
    }
    for (pid_t orphan : orphans) {
      const auto state = readProcStat(orphan);
      if (state && state->state != 'Z' && kill(orphan, SIGKILL) == 0) {
        ++count.killed;
      }
    }
    // Their children are this process's now, for the next round.
    count.still_alive = reapBy(orphans, deadline);
    if (!count.still_alive.empty() || Clock::now() >= deadline) {
      return count;
    }
  }
}

ProcessTree::ProcessTree(net::asio::io_context& io, std::chrono::milliseconds reap_every)
    : reap_timer_(io), reap_every_(reap_every), io_(io) {
  prctl(PR_GET_CHILD_SUBREAPER, &was_subreaper_);
  prctl(PR_SET_CHILD_SUBREAPER, 1);
}

ProcessTree::~ProcessTree() { prctl(PR_SET_CHILD_SUBREAPER, was_subreaper_); }

int ProcessTree::cgroupFd() { return cgroup_ != nullptr ? cgroup_->attemptFd() : -1; }

void ProcessTree::start(int guardian_pidfd, std::function<void()> last_word) {
  last_word_ = std::move(last_word);
  reapLater();
  if (guardian_pidfd < 0) {
    return;
  }
  guardian_watch_ = std::make_unique<ExitWatch>(
      io_, guardian_pidfd, [this] { onGuardianGone(); }, "ddprun's guardian");
}

// The guardian was SIGKILLed, as ddprun's pid was before there was one: the
// agent goes as it went then. Every descendant gets SIGKILL (pass after
// pass, for what forks meanwhile; a process with SIGKILL pending forks no
// more), then the agent exits, which closes its connections: the workers are
// signalled a millisecond or so before the rendezvous hears of the loss, but
// die after it (dying takes longer). Nothing else is torn down first: a
// connection closed by hand would be reconnected by the rendezvous client's
// thread meanwhile. No waiting: its orphans, already killed, go to init to be
// reaped.
void ProcessTree::onGuardianGone() {
  const int by_cgroup = cgroup_ != nullptr ? cgroup_->killAll(Clock::now()) : 0;
  std::vector<pid_t> killed;
  for (bool found = true; found;) {
    found = false;
    std::vector<pid_t> pending = childrenOf(getpid());
    while (!pending.empty()) {
      const pid_t pid = pending.back();
      pending.pop_back();
      const auto state = readProcStat(pid);
      if (state && state->state != 'Z' &&
          std::find(killed.begin(), killed.end(), pid) == killed.end() && kill(pid, SIGKILL) == 0) {
        killed.push_back(pid);
        found = true;
      }
      const auto children = childrenOf(pid);
      pending.insert(pending.end(), children.begin(), children.end());
    }
  }
  log().warn("ddprun's guardian has died: killed {} at once ({}); the agent ends with it",
             processes(static_cast<int>(killed.size())),
             by_cgroup > 0 ? "cgroup.kill and child subreaper" : "child subreaper");
  if (last_word_) {
    last_word_();  // the workers are dying already: this only tells the others
  }
  _exit(128 + SIGKILL);
}

void ProcessTree::finish(int attempt, std::chrono::milliseconds wait) {
  const LeftoverKill kill = killLeftovers(attempt, wait);
  if (wait.count() > 0 && !kill.orphans.still_alive.empty()) {
    log().warn("{} still alive {} after SIGKILL (uninterruptible sleep?)",
               processes(static_cast<int>(kill.orphans.still_alive.size())), formatSeconds(wait));
  }
  if (cgroup_ != nullptr) {
    cgroup_->remove();  // empty now; else the guardian tries again
  }
  finished_ = true;
  reap_timer_.cancel();
  guardian_watch_.reset();
}

void ProcessTree::reapLater() {
  reap_timer_.expires_after(reap_every_);
  reap_timer_.async_wait([this](const net::error_code& error) {
    if (error || finished_) {
      return;
    }
    for (pid_t orphan : ownOrphans()) {
      waitpid(orphan, nullptr, WNOHANG);
    }
    reapLater();
  });
}

ExitStatus ProcessTree::reapWorker(Subprocess& worker, int local_rank) {
  const int members = liveMembersOf(worker.pid());
  const ExitStatus status = worker.waitAndKillGroup();
  if (members > 0) {
    log().info("local rank {} (pid {}) {}: killed {} left in its process group", local_rank,
               worker.pid(), status.describe(), processes(members));
  }
  return status;
}

std::string LeftoverKill::mechanism() const {
  return by_cgroup == 0        ? "child subreaper"
         : orphans.killed == 0 ? "cgroup.kill"
                               : "cgroup.kill, then child subreaper";
}

LeftoverKill killEverythingLeft(WorkerCgroup* cgroup, Clock::time_point deadline) {
  LeftoverKill kill;
  kill.by_cgroup = cgroup != nullptr ? cgroup->killAll(deadline) : 0;
  kill.orphans = killOrphans(deadline);
  return kill;
}

LeftoverKill ProcessTree::killLeftovers(int attempt, std::chrono::milliseconds wait) {
  LeftoverKill kill = killEverythingLeft(cgroup_, Clock::now() + wait);
  if (kill.killed() > 0) {
    log().info("attempt {}: killed {} the workers left behind ({})", attempt,
               processes(kill.killed()), kill.mechanism());
  }
  return kill;
}

}  // namespace ddprun::launcher

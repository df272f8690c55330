// The job's own cgroups v2, used where the agent's cgroup is delegated to it
// and writable: one per attempt, <agent's cgroup>/ddprun-<pid>-<start
// time>-<n> (the guardian's pid and start time), beside the agent, one level
// deep (each level costs every task switch of the workers a little). Every
// worker starts in its attempt's cgroup (SpawnOptions::cgroup_fd), so
// whatever the worker starts stays inside, setsid and double forks included,
// and one write to cgroup.kill (Linux 5.14+) kills it all at once, even a
// process that forks meanwhile.
//
// "Delegated" means one of: the agent's cgroup is the root of its cgroup
// namespace (a container or a machine of its own, where nobody else manages
// the tree); it carries systemd's delegation mark (the trusted.delegate or
// user.delegate extended attribute, Delegate=yes); or it belongs to the
// agent's own non-root user (delegation by chown). Elsewhere (a systemd
// session scope, cgroup v1 only, a read-only mount, DDPRUN_CGROUP=0) no
// cgroup is made and the child subreaper and the guardian do the work alone.
//
// The guardian makes the first right after it forks the agent, and the
// agent adopts it (GuardianLink, guardian.hpp); the agent kills what is in
// its attempt's cgroup at the end of every attempt and removes it, and the
// guardian kills and removes any left once the agent has ended. Empty ones
// left by a guardian and an agent SIGKILLed together are removed by the next
// ddprun that makes one beside them. Each process uses its copy from one
// thread.
#pragma once

#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ddprun::launcher {

// The cgroup v2 path in the text of /proc/self/cgroup ("0::/a/b" gives
// "/a/b"); nullopt when there is no v2 line.
std::optional<std::string> cgroupV2PathIn(std::string_view proc_self_cgroup);

struct CgroupMount {
  std::filesystem::path point;  // where it is mounted, e.g. /sys/fs/cgroup
  std::string root;             // the cgroup at that point, usually "/"
};

// The first cgroup2 mount in the text of /proc/self/mountinfo.
std::optional<CgroupMount> cgroupV2MountIn(std::string_view mountinfo);

struct CgroupSupport {
  std::optional<std::filesystem::path> parent;  // the agent's cgroup, to make the job's in
  std::filesystem::path mount;                  // where cgroup2 is mounted, if it is
  std::string why_not;                          // when there is no parent
};

// Where this process may make the job's cgroup, or why it may not.
CgroupSupport detectCgroupSupport();

class WorkerCgroup;

// The job's cgroup, where detectCgroupSupport() allows one and it can be
// made; else nullptr. `description` says which, for the log: "cgroup <path>
// (cgroup.kill)", or "no cgroup (<why not>)".
std::unique_ptr<WorkerCgroup> makeJobCgroup(std::string& description);

class WorkerCgroup {
 public:
  using Clock = std::chrono::steady_clock;

  // Makes the first attempt's cgroup under `parent`; nullptr, and `why_not`
  // set, when it cannot or the kernel has no cgroup.kill.
  static std::unique_ptr<WorkerCgroup> create(const std::filesystem::path& parent,
                                              std::string& why_not);
  // The job's cgroups `name` under `parent`, whose first attempt's cgroup
  // another process of the job (the guardian) made; nullptr, and `why_not`
  // set, when that cannot be opened.
  static std::unique_ptr<WorkerCgroup> adopt(const std::filesystem::path& parent, std::string name,
                                             std::string& why_not);
  ~WorkerCgroup();  // closes its descriptor; remove() removes the cgroups
  WorkerCgroup(const WorkerCgroup&) = delete;
  WorkerCgroup& operator=(const WorkerCgroup&) = delete;

  // "<parent>/ddprun-<pid>-<start time>-<n>, one per attempt", for the log.
  std::string describe() const;
  const std::filesystem::path& parent() const { return parent_; }
  const std::string& name() const { return name_; }  // ddprun-<pid>-<start time>
  // The cgroup the workers of the attempt now running start in, open (what
  // SpawnOptions::cgroup_fd wants), made on first use after each killAll().
  // A fresh one per attempt, because Linux SIGKILLs at birth a
  // process cloned into a cgroup that was ever killed through cgroup.kill.
  // -1 if it cannot be made.
  int attemptFd();
  // SIGKILLs every process in this job's cgroups through cgroup.kill, waits,
  // until `deadline`, for them to be empty, and removes them. Returns how
  // many processes they held.
  int killAll(Clock::time_point deadline);
  // Removes this job's cgroups, which must be empty; false if one remains.
  bool remove();

 private:
  WorkerCgroup(std::filesystem::path parent, std::string name);
  // This job's cgroups that exist now (also those made by another process of
  // the job: the guardian's copy never made one).
  std::vector<std::filesystem::path> ours() const;

  std::filesystem::path parent_;
  std::string name_;  // ddprun-<pid>-<start time> of the guardian
  std::filesystem::path attempt_path_;
  int attempt_fd_ = -1;
  int attempts_ = 0;  // attempt cgroups made
};

}  // namespace ddprun::launcher

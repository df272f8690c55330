#include "ddprun/launcher/supervision/worker_cgroup.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

namespace ddprun::launcher {
namespace {

namespace fs = std::filesystem;

std::string readAll(const fs::path& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// Why `own` (at `dir`) is not this process's to manage, or nullopt if it is.
std::optional<std::string> notDelegated(const std::string& own, const fs::path& dir) {
  if (own == "/") {
    return std::nullopt;  // the root of its cgroup namespace: nobody else manages it
  }
  for (const char* mark : {"trusted.delegate", "user.delegate"}) {
    char value[8] = {};
    if (getxattr(dir.c_str(), mark, value, sizeof(value)) > 0 && value[0] == '1') {
      return std::nullopt;  // systemd's Delegate=yes
    }
  }
  struct stat info {};
  if (geteuid() != 0 && stat(dir.c_str(), &info) == 0 && info.st_uid == geteuid()) {
    return std::nullopt;  // delegated by chown to this user
  }
  return "its cgroup " + own + " is not delegated to it";
}

// Field 22 of /proc/<pid>/stat: when it started, in clock ticks since boot.
std::string startTimeOf(pid_t pid) {
  const std::string stat = readAll("/proc/" + std::to_string(pid) + "/stat");
  std::istringstream fields(stat.substr(std::min(stat.size(), stat.rfind(')') + 1)));
  std::string field;
  for (int index = 3; index <= 22 && fields >> field; ++index) {
  }
  return field;
}

// "ddprun-<pid>-<start time>" of this process: unique for its life.
std::string nameForThisProcess() {
  return "ddprun-" + std::to_string(getpid()) + "-" + startTimeOf(getpid());
}

bool populated(const fs::path& cgroup) {
  return readAll(cgroup / "cgroup.events").find("populated 1") != std::string::npos;
}

// Waits until `cgroup` is empty or `deadline` passes: cgroup.events signals
// POLLPRI when "populated" changes.
void waitUntilEmpty(const fs::path& cgroup, WorkerCgroup::Clock::time_point deadline) {
  const int events = open((cgroup / "cgroup.events").c_str(), O_RDONLY | O_CLOEXEC);
  while (events >= 0 && populated(cgroup) && WorkerCgroup::Clock::now() < deadline) {
    const auto left =
        std::chrono::ceil<std::chrono::milliseconds>(deadline - WorkerCgroup::Clock::now());
    char text[128];
    [[maybe_unused]] ssize_t got = pread(events, text, sizeof(text), 0);  // re-arms the event
    pollfd change{events, POLLPRI, 0};
    poll(&change, 1, static_cast<int>(std::min<long long>(left.count(), INT_MAX)));
  }
  if (events >= 0) {
    close(events);
  }
}

// Attempt cgroups of ddprun processes that no longer run, "ddprun-<pid>-<start
// time>-<n>": left when a guardian and its agent were SIGKILLed together.
// Removed if empty (rmdir refuses otherwise).
void removeStale(const fs::path& parent) {
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(parent, error)) {
    std::istringstream name(entry.path().filename().string());
    std::string ddprun, pid, start;
    if (std::getline(name, ddprun, '-') && ddprun == "ddprun" && std::getline(name, pid, '-') &&
        std::getline(name, start, '-') && startTimeOf(std::atoi(pid.c_str())) != start) {
      rmdir(entry.path().c_str());
    }
  }
}

}  // namespace

std::optional<std::string> cgroupV2PathIn(std::string_view proc_self_cgroup) {
  std::istringstream lines{std::string(proc_self_cgroup)};
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("0::", 0) == 0) {
      return line.substr(3);
    }
  }
  return std::nullopt;
}

// mountinfo: id parent major:minor root point options [optional...] - type source ...
std::optional<CgroupMount> cgroupV2MountIn(std::string_view mountinfo) {
  std::istringstream lines{std::string(mountinfo)};
  for (std::string line; std::getline(lines, line);) {
    std::istringstream fields(line);
    std::string id, parent, device, root, point, field;
    fields >> id >> parent >> device >> root >> point;
    while (fields >> field && field != "-") {
    }
    if (fields >> field && field == "cgroup2") {
      return CgroupMount{point, root};
    }
  }
  return std::nullopt;
}

CgroupSupport detectCgroupSupport() {
  CgroupSupport support;
  if (const char* setting = std::getenv("DDPRUN_CGROUP"); setting && std::string(setting) == "0") {
    support.why_not = "DDPRUN_CGROUP=0";
    return support;
  }
  const auto mount = cgroupV2MountIn(readAll("/proc/self/mountinfo"));
  const auto own = cgroupV2PathIn(readAll("/proc/self/cgroup"));
  if (!mount || !own) {
    support.why_not = "no cgroup v2 here";
    return support;
  }
  support.mount = mount->point;
  const std::string root = mount->root == "/" ? "" : mount->root;
  if (own->rfind(root, 0) != 0) {
    support.why_not = "its cgroup " + *own + " is not under the cgroup2 mount";
    return support;
  }
  std::string relative = own->substr(root.size());
  relative.erase(0, relative.find_first_not_of('/'));
  const fs::path dir = relative.empty() ? mount->point : mount->point / relative;
  if (const auto why = notDelegated(*own, dir)) {
    support.why_not = *why;
  } else if (access(dir.c_str(), W_OK) != 0 || access((dir / "cgroup.procs").c_str(), W_OK) != 0) {
    support.why_not = dir.string() + " is not writable";
  } else {
    support.parent = dir;
  }
  return support;
}

std::unique_ptr<WorkerCgroup> makeJobCgroup(std::string& description) {
  const CgroupSupport support = detectCgroupSupport();
  std::string why_not = support.why_not;
  auto cgroup = support.parent ? WorkerCgroup::create(*support.parent, why_not) : nullptr;
  description =
      cgroup ? "cgroups " + cgroup->describe() + " (cgroup.kill)" : "no cgroup (" + why_not + ")";
  return cgroup;
}

std::unique_ptr<WorkerCgroup> WorkerCgroup::create(const fs::path& parent, std::string& why_not) {
  removeStale(parent);
  auto cgroup = std::unique_ptr<WorkerCgroup>(new WorkerCgroup(parent, nameForThisProcess()));
  if (cgroup->attemptFd() < 0) {
    why_not = "cannot create a cgroup in " + parent.string() + ": " + std::strerror(errno);
    return nullptr;
  }
  if (access((cgroup->attempt_path_ / "cgroup.kill").c_str(), W_OK) != 0) {
    why_not = "this kernel has no cgroup.kill (Linux 5.14 or later)";
    cgroup->remove();
    return nullptr;
  }
  return cgroup;
}

std::unique_ptr<WorkerCgroup> WorkerCgroup::adopt(const fs::path& parent, std::string name,
                                                  std::string& why_not) {
  auto cgroup = std::unique_ptr<WorkerCgroup>(new WorkerCgroup(parent, std::move(name)));
  cgroup->attempt_path_ = parent / (cgroup->name_ + "-0");
  cgroup->attempt_fd_ = open(cgroup->attempt_path_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (cgroup->attempt_fd_ < 0) {
    why_not =
        "cannot open the cgroup " + cgroup->attempt_path_.string() + ": " + std::strerror(errno);
    return nullptr;
  }
  cgroup->attempts_ = 1;
  return cgroup;
}

WorkerCgroup::WorkerCgroup(fs::path parent, std::string name)
    : parent_(std::move(parent)), name_(std::move(name)) {}

WorkerCgroup::~WorkerCgroup() {
  if (attempt_fd_ >= 0) {
    close(attempt_fd_);
  }
}

std::string WorkerCgroup::describe() const {
  return (parent_ / name_).string() + "-<n>, one per attempt";
}

int WorkerCgroup::attemptFd() {
  if (attempt_fd_ < 0) {
    attempt_path_ = parent_ / (name_ + "-" + std::to_string(attempts_++));
    if (mkdir(attempt_path_.c_str(), 0755) == 0) {
      attempt_fd_ = open(attempt_path_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    }
  }
  return attempt_fd_;
}

std::vector<fs::path> WorkerCgroup::ours() const {
  std::vector<fs::path> cgroups;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(parent_, error)) {
    if (entry.path().filename().string().rfind(name_ + "-", 0) == 0) {
      cgroups.push_back(entry.path());
    }
  }
  return cgroups;
}

int WorkerCgroup::killAll(Clock::time_point deadline) {
  int count = 0;
  for (const fs::path& cgroup : ours()) {
    // Their pidfds, readable as each dies: cgroup.events is slower to say so
    // (it is notified at most every 10 ms).
    std::vector<int> pidfds;
    std::istringstream procs(readAll(cgroup / "cgroup.procs"));
    for (pid_t pid = 0; procs >> pid; ++count) {
      pidfds.push_back(static_cast<int>(syscall(SYS_pidfd_open, pid, 0)));
    }
    if (populated(cgroup)) {
      std::ofstream(cgroup / "cgroup.kill") << "1";
      for (int pidfd : pidfds) {
        const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
        pollfd exited{pidfd, POLLIN, 0};
        poll(&exited, pidfd >= 0 ? 1 : 0,
             static_cast<int>(std::clamp<long long>(left.count(), 0, INT_MAX)));
      }
      waitUntilEmpty(cgroup, deadline);  // what forked meanwhile
    }
    for (int pidfd : pidfds) {
      if (pidfd >= 0) {
        close(pidfd);
      }
    }
  }
  remove();
  return count;
}

bool WorkerCgroup::remove() {
  if (attempt_fd_ >= 0) {
    close(attempt_fd_);
    attempt_fd_ = -1;
  }
  bool removed = true;
  for (const fs::path& cgroup : ours()) {
    removed = rmdir(cgroup.c_str()) == 0 && removed;
  }
  return removed;
}

}  // namespace ddprun::launcher

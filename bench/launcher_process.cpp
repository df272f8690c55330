#include "launcher_process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <deque>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "child_process.hpp"

extern char** environ;

namespace ddprun::bench {
namespace {

std::vector<char*> pointers(std::vector<std::string>& strings) {
  std::vector<char*> result;
  for (auto& text : strings) {
    result.push_back(text.data());
  }
  result.push_back(nullptr);
  return result;
}

// Runs in the forked child: only async-signal-safe calls until exec.
[[noreturn]] void execChild(char** argv, char** envp, int out_fd, pid_t parent) {
  ::setpgid(0, 0);
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) {  // the benchmark died before prctl
    ::_exit(127);
  }
  if (out_fd >= 0) {
    ::dup2(out_fd, STDOUT_FILENO);
    ::dup2(out_fd, STDERR_FILENO);
  }
  ::execve(argv[0], argv, envp);
  static const char kMsg[] = "launch_bench: exec failed\n";
  [[maybe_unused]] auto n = ::write(STDERR_FILENO, kMsg, sizeof(kMsg) - 1);
  ::_exit(127);
}

int openPidfd(pid_t pid) { return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)); }

}  // namespace

LauncherProcess::LauncherProcess(const LaunchSpec& spec) {
  if (spec.argv.empty() || ::access(spec.argv[0].c_str(), X_OK) != 0) {
    throw std::runtime_error("not an executable: " + (spec.argv.empty() ? "" : spec.argv[0]));
  }
  auto argv_strings = spec.argv;
  auto env_strings = spec.env;
  auto argv = pointers(argv_strings);
  auto envp = pointers(env_strings);
  const int out_fd = spec.log.empty()
                         ? -1
                         : ::open(spec.log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  const pid_t parent = ::getpid();
  started_ = Clock::now();
  pid_ = ::fork();
  if (pid_ == 0) {
    execChild(argv.data(), envp.data(), out_fd, parent);
  }
  if (out_fd >= 0) {
    ::close(out_fd);
  }
  if (pid_ < 0) {
    throw std::runtime_error("fork failed");
  }
  ::setpgid(pid_, pid_);     // also here, so a kill of the group cannot miss
  pidfd_ = openPidfd(pid_);  // works on a zombie too: nothing is reaped yet
  if (pidfd_ < 0) {
    ::kill(pid_, SIGKILL);
    reap();
    throw std::runtime_error("pidfd_open failed (launch_bench needs Linux 5.3 or later)");
  }
}

LauncherProcess::~LauncherProcess() {
  if (!reaped_) {
    stop(std::chrono::milliseconds(5000));
  }
  if (pidfd_ >= 0) {
    ::close(pidfd_);
  }
}

bool LauncherProcess::pollExit(int timeout_ms) {
  if (reaped_) {
    return true;
  }
  pollfd entry{pidfd_, POLLIN, 0};
  const int ready = ::poll(&entry, 1, timeout_ms);
  if (ready > 0) {
    exited_ = Clock::now();
    reap();
    return true;
  }
  return false;
}

void LauncherProcess::reap() {
  while (::waitpid(pid_, &status_, 0) < 0 && errno == EINTR) {
  }
  reaped_ = true;
}

bool LauncherProcess::waitExit(Clock::time_point deadline) {
  return waitExitSampling(deadline, std::chrono::milliseconds(1000), [] {});
}

bool LauncherProcess::waitExitSampling(Clock::time_point deadline, std::chrono::milliseconds period,
                                       const std::function<void()>& sample) {
  using std::chrono::duration_cast;
  using std::chrono::milliseconds;
  while (!reaped_) {
    const auto left = duration_cast<milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) {
      return false;
    }
    if (pollExit(static_cast<int>(std::min(left, period).count()))) {
      return true;
    }
    sample();
  }
  return true;
}

void LauncherProcess::stop(std::chrono::milliseconds grace) {
  if (reaped_) {
    return;
  }
  ::kill(pid_, SIGTERM);
  if (!waitExit(Clock::now() + grace)) {
    ::kill(-pid_, SIGKILL);
    reap();
  }
}

std::string LauncherProcess::describeStatus() const {
  if (!reaped_) {
    return "running";
  }
  if (WIFEXITED(status_)) {
    return "exit " + std::to_string(WEXITSTATUS(status_));
  }
  if (WIFSIGNALED(status_)) {
    return "signal " + std::to_string(WTERMSIG(status_));
  }
  return "unknown";
}

bool LauncherProcess::succeeded() const {
  return reaped_ && WIFEXITED(status_) && WEXITSTATUS(status_) == 0;
}

std::optional<std::int64_t> peakRssKib(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) {
      return std::stoll(line.substr(6));
    }
  }
  return std::nullopt;
}

bool waitForFiles(const std::vector<std::filesystem::path>& files, LauncherProcess& launcher,
                  LauncherProcess::Clock::time_point deadline) {
  auto all_there = [&files] {
    return std::all_of(files.begin(), files.end(),
                       [](const auto& file) { return std::filesystem::exists(file); });
  };
  while (!all_there()) {
    if (!launcher.running() || LauncherProcess::Clock::now() > deadline) {
      return false;
    }
    // Also notices the launcher's exit, so a failed run is not waited out.
    launcher.waitExit(LauncherProcess::Clock::now() + std::chrono::milliseconds(2));
  }
  return true;
}

std::optional<std::int64_t> readNumber(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::int64_t value = 0;
  if (in >> value) {
    return value;
  }
  return std::nullopt;
}

std::optional<RestartStamps> readRestartStamps(const std::filesystem::path& dir, int nproc) {
  const auto crash = readNumber(dir / "crash");
  std::vector<std::int64_t> starts, terms;
  for (int rank = 0; rank < nproc; ++rank) {
    if (auto start = readNumber(dir / ("start." + std::to_string(rank)))) {
      starts.push_back(*start);
    }
    if (auto term = readNumber(dir / ("term." + std::to_string(rank)))) {
      terms.push_back(*term);
    }
  }
  if (!crash || static_cast<int>(starts.size()) != nproc) {
    return std::nullopt;
  }
  auto ms_after_crash = [&crash](std::int64_t ns) {
    return static_cast<double>(ns - *crash) / 1e6;
  };
  RestartStamps stamps;
  stamps.first_start_ms = ms_after_crash(*std::min_element(starts.begin(), starts.end()));
  stamps.last_start_ms = ms_after_crash(*std::max_element(starts.begin(), starts.end()));
  if (!terms.empty()) {
    stamps.first_term_ms = ms_after_crash(*std::min_element(terms.begin(), terms.end()));
  }
  return stamps;
}

std::string tailOf(const std::filesystem::path& path, int lines) {
  std::ifstream in(path);
  std::deque<std::string> last;
  std::string line;
  while (std::getline(in, line)) {
    last.push_back(line);
    if (static_cast<int>(last.size()) > lines) {
      last.pop_front();
    }
  }
  std::ostringstream out;
  for (const auto& kept : last) {
    out << "  " << kept << '\n';
  }
  return out.str();
}

OtherCpu::OtherCpu()
    : wall_(std::chrono::steady_clock::now()),
      busy_(machineBusySeconds()),
      own_(processCpuSeconds(/*include_children=*/true)) {}

double OtherCpu::cores() const {
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_).count();
  const double other =
      (machineBusySeconds() - busy_) - (processCpuSeconds(/*include_children=*/true) - own_);
  return wall > 0 ? std::max(0.0, other / wall) : 0.0;
}

std::vector<std::string> currentEnvironment() {
  std::vector<std::string> env;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    env.emplace_back(*entry);
  }
  return env;
}

std::vector<std::string> launcherBaseEnvironment() {
  std::vector<std::string> env = currentEnvironment();
  std::erase_if(env, [](std::string_view text) {
    return text.starts_with("PET_") || text.starts_with("TORCHELASTIC_") ||
           text.starts_with("PYTHON_EXEC=") || text.starts_with("LAUNCH_BENCH_") ||
           text.starts_with("TMPDIR=");
  });
  return env;
}

}  // namespace ddprun::bench

#include "child_process.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace ddprun::bench {
namespace {

// Live children, so the watchdog can kill them before it exits the process.
std::mutex g_children_mutex;
std::vector<pid_t> g_children;

void registerChild(pid_t pid) {
  std::lock_guard lock(g_children_mutex);
  g_children.push_back(pid);
}

void unregisterChild(pid_t pid) {
  std::lock_guard lock(g_children_mutex);
  std::erase(g_children, pid);
}

void killAllChildren() {
  std::lock_guard lock(g_children_mutex);
  for (pid_t pid : g_children) {
    ::kill(pid, SIGKILL);
  }
}

// Runs in the forked child: only async-signal-safe calls until exec.
[[noreturn]] void execChild(const std::vector<char*>& args, pid_t parent) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) {  // the parent died before prctl
    ::_exit(127);
  }
  int devnull = ::open("/dev/null", O_WRONLY);
  if (devnull >= 0) {
    ::dup2(devnull, STDOUT_FILENO);
  }
  ::execv(args[0], args.data());
  static const char kMsg[] = "store_bench: exec failed\n";
  [[maybe_unused]] auto n = ::write(STDERR_FILENO, kMsg, sizeof(kMsg) - 1);
  ::_exit(127);
}

std::string describeStatus(int status) {
  if (WIFEXITED(status)) {
    return "exit " + std::to_string(WEXITSTATUS(status));
  }
  if (WIFSIGNALED(status)) {
    return "signal " + std::to_string(WTERMSIG(status));
  }
  return "unknown";
}

}  // namespace

ChildProcess::ChildProcess(std::vector<std::string> argv) {
  if (::access(argv.at(0).c_str(), X_OK) != 0) {
    throw std::runtime_error("not an executable: " + argv[0]);
  }
  std::vector<char*> args;
  for (auto& arg : argv) {
    args.push_back(arg.data());
  }
  args.push_back(nullptr);
  const pid_t parent = ::getpid();
  pid_ = ::fork();
  if (pid_ < 0) {
    throw std::runtime_error("fork failed");
  }
  if (pid_ == 0) {
    execChild(args, parent);
  }
  registerChild(pid_);
}

ChildProcess::~ChildProcess() {
  if (pid_ > 0 && !reaped_) {
    stop();
  }
}

bool ChildProcess::running() {
  if (reaped_) {
    return false;
  }
  if (::waitpid(pid_, &status_, WNOHANG) == pid_) {
    reaped_ = true;
    unregisterChild(pid_);
  }
  return !reaped_;
}

std::string ChildProcess::stop(std::chrono::milliseconds grace) {
  if (running()) {
    ::kill(pid_, SIGTERM);
    const auto deadline = Clock::now() + grace;
    while (running() && Clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (running()) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, &status_, 0);
      reaped_ = true;
      unregisterChild(pid_);
      return describeStatus(status_) + " (did not exit on SIGTERM)";
    }
  }
  return describeStatus(status_);
}

double ChildProcess::cpuSeconds() const {
  std::ifstream stat("/proc/" + std::to_string(pid_) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) {
    return 0.0;
  }
  // Fields after the parenthesised command name; utime and stime are the
  // 14th and 15th fields overall, i.e. the 12th and 13th after ") ".
  std::istringstream rest(line.substr(line.rfind(')') + 2));
  std::string field;
  unsigned long long utime = 0, stime = 0;
  for (int i = 1; i <= 13 && rest >> field; ++i) {
    if (i == 12) {
      utime = std::stoull(field);
    }
    if (i == 13) {
      stime = std::stoull(field);
    }
  }
  return static_cast<double>(utime + stime) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

std::uint16_t waitForPortFile(const std::filesystem::path& path, ChildProcess& child,
                              std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (Clock::now() < deadline) {
    std::ifstream in(path);
    unsigned port = 0;
    if (in >> port && port > 0 && port < 65536) {
      return static_cast<std::uint16_t>(port);
    }
    if (!child.running()) {
      throw std::runtime_error("server exited before writing " + path.filename().string() + " (" +
                               child.stop() + ")");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  throw std::runtime_error("server did not write " + path.filename().string() + " within " +
                           std::to_string(timeout.count()) + " ms");
}

TempDir::TempDir(std::string_view prefix) {
  std::string pattern =
      (std::filesystem::temp_directory_path() / (std::string(prefix) + ".XXXXXX")).string();
  if (::mkdtemp(pattern.data()) == nullptr) {
    throw std::runtime_error("cannot create a temporary directory in " +
                             std::filesystem::temp_directory_path().string());
  }
  path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

struct Watchdog::State {
  std::mutex mutex;
  std::condition_variable cv;
  bool done = false;
  std::thread thread;
};

Watchdog::Watchdog(std::string what, std::chrono::milliseconds timeout)
    : state_(std::make_unique<State>()) {
  state_->thread = std::thread([state = state_.get(), what = std::move(what), timeout] {
    std::unique_lock lock(state->mutex);
    if (state->cv.wait_for(lock, timeout, [state] { return state->done; })) {
      return;
    }
    std::cerr << "store_bench: " << what << " did not finish within " << timeout.count()
              << " ms; killing the servers and giving up\n";
    killAllChildren();
    std::_Exit(3);
  });
}

Watchdog::~Watchdog() {
  {
    std::lock_guard lock(state_->mutex);
    state_->done = true;
  }
  state_->cv.notify_all();
  state_->thread.join();
}

double machineBusySeconds() {
  std::ifstream stat("/proc/stat");
  std::string cpu;
  unsigned long long user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0,
                     steal = 0;
  stat >> cpu >> user >> nice >> system >> idle >> iowait >> irq >> softirq >> steal;
  const auto busy = user + nice + system + irq + softirq + steal;
  return static_cast<double>(busy) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

double processCpuSeconds(bool include_children) {
  auto seconds = [](const timeval& tv) {
    return static_cast<double>(tv.tv_sec) + static_cast<double>(tv.tv_usec) / 1e6;
  };
  double total = 0.0;
  for (int who : {RUSAGE_SELF, RUSAGE_CHILDREN}) {
    if (who == RUSAGE_CHILDREN && !include_children) {
      break;
    }
    rusage usage{};
    ::getrusage(who, &usage);
    total += seconds(usage.ru_utime) + seconds(usage.ru_stime);
  }
  return total;
}

std::uint64_t raiseFdLimit() {
  rlimit limit{};
  ::getrlimit(RLIMIT_NOFILE, &limit);
  limit.rlim_cur = limit.rlim_max;
  ::setrlimit(RLIMIT_NOFILE, &limit);
  ::getrlimit(RLIMIT_NOFILE, &limit);
  return limit.rlim_cur;
}

std::filesystem::path selfDirectory() {
  return std::filesystem::read_symlink("/proc/self/exe").parent_path();
}

}  // namespace ddprun::bench

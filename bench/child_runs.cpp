#include "child_runs.hpp"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <stdexcept>
#include <string_view>
#include <system_error>

#include "ddprun/test_support/proc_status.hpp"

namespace ddprun::bench {

StartedChild startLogged(const LaunchSpec& spec) {
  launcher::SpawnOptions options;
  options.argv = spec.argv;
  options.env = spec.env;
  const int log = ::open(spec.log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (log < 0) {
    throw std::system_error(errno, std::generic_category(), "open " + spec.log.string());
  }
  options.stdout_fd = log;
  options.stderr_fd = log;
  try {
    const Clock::time_point started = Clock::now();
    StartedChild child{launcher::Subprocess(options), started};
    ::close(log);
    return child;
  } catch (...) {
    ::close(log);
    throw;
  }
}

std::optional<Clock::time_point> waitExit(launcher::Subprocess& child, Clock::time_point deadline,
                                          std::chrono::milliseconds period,
                                          const std::function<void()>& sample) {
  while (!child.exitStatus()) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) {
      return std::nullopt;
    }
    if (child.waitFor(std::min(left, period))) {
      break;
    }
    if (sample) {
      sample();
    }
  }
  return Clock::now();
}

std::string describeStatus(const launcher::Subprocess& child) {
  const auto status = child.exitStatus();
  if (!status) {
    return "running";
  }
  const bool exited = status->kind == launcher::ExitStatus::Kind::Exited;
  return (exited ? "exit " : "signal ") + std::to_string(status->code);
}

bool succeeded(const launcher::Subprocess& child) {
  const auto status = child.exitStatus();
  return status && status->success();
}

std::string stopAndDescribe(launcher::Subprocess& child, std::chrono::milliseconds grace) {
  if (!child.tryWait()) {
    child.signalGroup(SIGTERM);
    if (!child.waitFor(grace)) {
      child.stop(std::chrono::milliseconds(0));
      return describeStatus(child) + " (did not exit on SIGTERM)";
    }
  }
  return describeStatus(child);
}

std::optional<std::int64_t> peakRssKib(pid_t pid) {
  if (const auto kib = test_support::procStatusKiB(pid, "VmHWM")) {
    return static_cast<std::int64_t>(*kib);
  }
  return std::nullopt;
}

std::optional<std::int64_t> launcherPeakRssKib(pid_t pid) {
  const std::optional<std::int64_t> own = peakRssKib(pid);
  const pid_t agent = test_support::ddprunAgentOf(pid);
  if (!own || agent == pid) {
    return own;
  }
  return *own + peakRssKib(agent).value_or(0);
}

std::optional<std::int64_t> launcherPssKib(pid_t pid) {
  const std::optional<std::size_t> own = test_support::procPssKiB(pid);
  const pid_t agent = test_support::ddprunAgentOf(pid);
  if (!own) {
    return std::nullopt;
  }
  const std::size_t agent_kib = agent == pid ? 0 : test_support::procPssKiB(agent).value_or(0);
  return static_cast<std::int64_t>(*own + agent_kib);
}

bool waitForFiles(const std::vector<std::filesystem::path>& files, launcher::Subprocess& child,
                  Clock::time_point deadline) {
  auto all_there = [&files] {
    return std::all_of(files.begin(), files.end(),
                       [](const auto& file) { return std::filesystem::exists(file); });
  };
  while (!all_there()) {
    if (child.exitStatus() || Clock::now() > deadline) {
      return false;
    }
    // Also notices the child's exit, so a failed run is not waited out.
    child.waitFor(std::chrono::milliseconds(2));
  }
  return true;
}

EnvVars launcherBaseEnvironment() {
  EnvVars env = launcher::inheritedEnvironment();
  std::erase_if(env, [](const auto& variable) {
    const std::string_view name = variable.first;
    return name.starts_with("PET_") || name.starts_with("TORCHELASTIC_") || name == "PYTHON_EXEC" ||
           name.starts_with("LAUNCH_BENCH_") || name == "TMPDIR";
  });
  return env;
}

}  // namespace ddprun::bench

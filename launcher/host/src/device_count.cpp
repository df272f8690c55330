#include "ddprun/launcher/host/device_count.hpp"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "ddprun/launcher/process/subprocess.hpp"
#include "ddprun/proto/errors.hpp"

namespace ddprun::launcher {
namespace {

using Clock = std::chrono::steady_clock;

// A driver can hang (a GPU fallen off the bus): the agent gives up and says so.
constexpr double kDefaultDeadlineSeconds = 60;
constexpr const char* kDeadlineVariable = "DDPRUN_GPU_COUNT_TIMEOUT";
constexpr std::size_t kMaxAnswer = 1 << 20;

GpuCount noneBecause(std::string why) {
  GpuCount none;
  none.why_none = "counting GPUs: " + std::move(why);
  return none;
}

// Everything the child writes until it closes its stdout, or nullopt at the
// deadline.
std::optional<std::string> readUntilClosed(int fd, Clock::time_point deadline) {
  std::string text;
  char buffer[4096];
  while (text.size() < kMaxAnswer) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    pollfd readable{fd, POLLIN, 0};
    const int ready = ::poll(&readable, 1, static_cast<int>(std::max<long>(left.count(), 0)));
    if (ready == 0) {
      return std::nullopt;
    }
    if (ready < 0) {
      continue;  // EINTR
    }
    const ssize_t got = ::read(fd, buffer, sizeof(buffer));
    if (got <= 0) {
      break;
    }
    text.append(buffer, static_cast<std::size_t>(got));
  }
  return text;
}

// DDPRUN_GPU_COUNT_TIMEOUT seconds, 60 when unset.
std::chrono::milliseconds countingDeadline() {
  const char* text = std::getenv(kDeadlineVariable);
  if (text == nullptr || *text == '\0') {
    return std::chrono::milliseconds(static_cast<long>(kDefaultDeadlineSeconds * 1000));
  }
  char* end = nullptr;
  const double seconds = std::strtod(text, &end);
  if (*end != '\0' || !(seconds > 0) || seconds > 86400) {
    throw ConfigError(std::string(kDeadlineVariable) + "='" + text +
                      "': expected seconds, above 0 and at most 86400");
  }
  return std::chrono::milliseconds(static_cast<long>(seconds * 1000));
}

std::string secondsText(std::chrono::milliseconds duration) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g s", static_cast<double>(duration.count()) / 1000);
  return text;
}

// `devices --json`, and `extra` after it, in a child.
GpuCount countInChild(const char* extra) {
  const std::chrono::milliseconds limit = countingDeadline();
  int ends[2];
  if (::pipe2(ends, O_CLOEXEC) != 0) {
    return noneBecause("cannot create a pipe");
  }
  SpawnOptions options;
  options.argv = {"/proc/self/exe", "devices", "--json"};
  if (extra != nullptr) {
    options.argv.emplace_back(extra);
  }
  options.env = inheritedEnvironment();
  options.stdout_fd = ends[1];
  std::optional<Subprocess> child;
  try {
    child.emplace(options);
  } catch (const SpawnError& error) {
    ::close(ends[0]);
    ::close(ends[1]);
    return noneBecause(error.what());
  }
  ::close(ends[1]);
  const auto deadline = Clock::now() + limit;
  const std::optional<std::string> answer = readUntilClosed(ends[0], deadline);
  ::close(ends[0]);
  std::optional<ExitStatus> status;
  if (answer) {
    status = child->waitFor(std::chrono::duration_cast<std::chrono::milliseconds>(
        std::max(deadline - Clock::now(), Clock::duration(std::chrono::seconds(1)))));
  }
  if (!status) {
    // A driver stuck in the kernel outlives even SIGKILL: never wait on it.
    child->killAndAbandon();
    return noneBecause("NVML and the CUDA driver gave no answer in " + secondsText(limit) + " (" +
                       kDeadlineVariable + ")");
  }
  if (!status->success()) {
    return noneBecause("the child asking NVML and the CUDA driver was " + status->describe());
  }
  try {
    return proto::visibleGpusFromJson(*answer);
  } catch (const Error& error) {
    return noneBecause(error.what());
  }
}

}  // namespace

// The count alone never starts the driver for bus ids (seconds on a node
// with two GPU models); --numa-binding's bus ids, asked after it, may.
GpuCount countVisibleGpus() {
  static const GpuCount gpus = countInChild("--count-only");
  return gpus;
}

GpuCount countVisibleGpusNow() { return countInChild("--count-only"); }

std::vector<std::string> visibleGpuPciBusIds() {
  static const GpuCount gpus = countInChild(nullptr);
  return gpus.bus_ids;
}

}  // namespace ddprun::launcher

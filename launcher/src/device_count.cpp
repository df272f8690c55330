#include "ddprun/launcher/device_count.hpp"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <chrono>

#include "ddprun/launcher/subprocess.hpp"
#include "ddprun/proto/errors.hpp"

namespace ddprun::launcher {
namespace {

using Clock = std::chrono::steady_clock;

// A driver can hang (a GPU fallen off the bus): the agent gives up and says so.
constexpr std::chrono::seconds kCountingDeadline{60};
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
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
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

GpuCount countInChild() {
  int ends[2];
  if (::pipe2(ends, O_CLOEXEC) != 0) {
    return noneBecause("cannot create a pipe");
  }
  SpawnOptions options;
  options.argv = {"/proc/self/exe", "devices", "--json"};
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
  const auto deadline = Clock::now() + kCountingDeadline;
  const std::optional<std::string> answer = readUntilClosed(ends[0], deadline);
  ::close(ends[0]);
  const auto status = child->waitFor(std::chrono::duration_cast<std::chrono::milliseconds>(
      std::max(deadline - Clock::now(), Clock::duration(std::chrono::seconds(1)))));
  if (!answer || !status) {
    // ~Subprocess kills and reaps it.
    return noneBecause("NVML and the CUDA driver gave no answer in " +
                       std::to_string(kCountingDeadline.count()) + " s");
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

const GpuCount& visibleGpus() {
  static const GpuCount gpus = countInChild();
  return gpus;
}

}  // namespace

GpuCount countVisibleGpus() { return visibleGpus(); }

std::vector<std::string> visibleGpuPciBusIds() { return visibleGpus().bus_ids; }

}  // namespace ddprun::launcher

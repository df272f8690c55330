#include "ddprun/worker/timeline_events.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "ddprun/proto/env_contract.hpp"

namespace ddprun::worker {

void reportTimelineEvent(const TimelineEvent& event) {
  const char* path = std::getenv(std::string(proto::env::kTimelineEvents).c_str());
  if (path == nullptr || *path == '\0') {
    return;
  }
  try {
    nlohmann::ordered_json line;
    line["name"] = event.name;
    line["ts_monotonic_ns"] =
        std::chrono::duration_cast<std::chrono::nanoseconds>(event.at.time_since_epoch()).count();
    if (event.duration) {
      line["dur_ns"] = event.duration->count();
    }
    for (const auto& [key, value] : event.numbers) {
      line[key] = value;
    }
    for (const auto& [key, value] : event.texts) {
      line[key] = value;
    }
    const std::string text = line.dump() + "\n";
    // O_APPEND and one write(): whole lines, whoever else appends.
    const int fd = ::open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) {
      return;
    }
    [[maybe_unused]] const ssize_t written = ::write(fd, text.data(), text.size());
    ::close(fd);
  } catch (...) {
    // Best effort only.
  }
}

ProgressReport::ProgressReport() {
  const char* path = std::getenv(std::string(proto::env::kProgressEvents).c_str());
  if (path != nullptr && *path != '\0') {
    fd_ = ::open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  }
}

ProgressReport::~ProgressReport() {
  if (fd_ >= 0) {
    ::close(fd_);
  }
}

void ProgressReport::stepDone(std::int64_t step) const {
  if (fd_ < 0) {
    return;
  }
  const auto now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                       std::chrono::steady_clock::now().time_since_epoch())
                       .count();
  char line[128];
  const int length = std::snprintf(
      line, sizeof line, "{\"name\": \"progress\", \"ts_monotonic_ns\": %lld, \"step\": %lld}\n",
      static_cast<long long>(now), static_cast<long long>(step));
  if (length > 0 && static_cast<std::size_t>(length) < sizeof line) {
    [[maybe_unused]] const ssize_t written = ::write(fd_, line, static_cast<std::size_t>(length));
  }
}

}  // namespace ddprun::worker

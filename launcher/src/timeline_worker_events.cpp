#include "timeline_worker_events.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "ddprun/launcher/timeline_format.hpp"

namespace ddprun::launcher {
namespace {

constexpr std::size_t kMaxBytes = 1 << 20;

// Closes the descriptor it is given.
struct FdCloser {
  int fd;
  ~FdCloser() { ::close(fd); }
};

// The first kMaxBytes of `file`, read with open()/read() rather than an
// ifstream: the worker controls what is at the path, and the agent's loop
// thread must neither block on it (a FIFO: O_NONBLOCK, and only a regular
// file is read) nor follow it elsewhere (a link to /dev/zero: O_NOFOLLOW)
// nor read it without bound. Sets `why` and returns "" when it is skipped.
std::string firstBytes(const std::filesystem::path& file, std::string& why) {
  const int fd = ::open(file.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ELOOP) {
      why = "a symbolic link";
    } else if (errno != ENOENT) {
      why = std::strerror(errno);
    }
    return "";
  }
  const FdCloser closer{fd};
  struct stat status {};
  if (::fstat(fd, &status) != 0 || !S_ISREG(status.st_mode)) {
    why = "not a regular file";
    return "";
  }
  std::string text(kMaxBytes, '\0');
  std::size_t got = 0;
  while (got < kMaxBytes) {
    const ssize_t n = ::read(fd, text.data() + got, kMaxBytes - got);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n < 0) {
      why = std::strerror(errno);
      return "";
    }
    if (n == 0) {
      break;
    }
    got += static_cast<std::size_t>(n);
  }
  text.resize(got);
  return text;
}

}  // namespace

std::optional<WorkerEvent> parseWorkerEvent(const std::string& line) {
  nlohmann::ordered_json parsed =
      nlohmann::ordered_json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (!parsed.is_object() || !parsed.contains("name") || !parsed["name"].is_string() ||
      !parsed.contains("ts_monotonic_ns") || !parsed["ts_monotonic_ns"].is_number_integer()) {
    return std::nullopt;
  }
  WorkerEvent event;
  event.name = parsed["name"].get<std::string>();
  event.ts_us = parsed["ts_monotonic_ns"].get<std::int64_t>() / 1000;
  if (parsed.contains("dur_ns")) {
    if (!parsed["dur_ns"].is_number_integer() || parsed["dur_ns"].get<std::int64_t>() < 0) {
      return std::nullopt;
    }
    event.dur_us = parsed["dur_ns"].get<std::int64_t>() / 1000;
  }
  for (const auto& [key, value] : parsed.items()) {
    if (key != "name" && key != "ts_monotonic_ns" && key != "dur_ns") {
      event.args[key] = value;
    }
  }
  return event;
}

WorkerEventsRead readWorkerEvents(const std::filesystem::path& file) {
  WorkerEventsRead read;
  const std::string text = firstBytes(file, read.unreadable);
  const bool cut = text.size() == kMaxBytes;
  std::size_t begin = 0;
  while (begin < text.size()) {
    const std::size_t end = text.find('\n', begin);
    if (end == std::string::npos && cut) {
      break;  // a last line the cap cut short
    }
    const std::string line =
        text.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
    begin = end == std::string::npos ? text.size() : end + 1;
    if (line.find_first_not_of(" \t\r") == std::string::npos) {
      continue;
    }
    if (auto event = parseWorkerEvent(line)) {
      read.events.push_back(std::move(*event));
    } else {
      ++read.bad_lines;
    }
  }
  return read;
}

std::vector<nlohmann::ordered_json> reportedTraceEvents(std::vector<WorkerEvent> reported, int pid,
                                                        int local_rank, int rank, int round) {
  std::vector<nlohmann::ordered_json> events;
  const int tid = timeline::reportedTrack(local_rank);
  for (WorkerEvent& one : reported) {
    auto trace = timeline::traceEvent(one.name, one.dur_us ? 'X' : 'i', one.ts_us, pid, tid);
    if (one.dur_us) {
      trace["dur"] = *one.dur_us;
    } else {
      trace["s"] = "t";
    }
    one.args.emplace("rank", rank);
    one.args.emplace("round", round);
    trace["args"] = std::move(one.args);
    events.push_back(std::move(trace));
  }
  return events;
}

}  // namespace ddprun::launcher

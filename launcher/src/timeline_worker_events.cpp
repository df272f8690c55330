#include "timeline_worker_events.hpp"

#include <fstream>

#include "ddprun/launcher/timeline_format.hpp"

namespace ddprun::launcher {
namespace {

constexpr std::size_t kMaxBytes = 1 << 20;

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
  std::ifstream in(file);
  std::size_t bytes = 0;
  for (std::string line; bytes < kMaxBytes && std::getline(in, line);) {
    bytes += line.size() + 1;
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

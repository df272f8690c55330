#include "ddprun/launcher/observe/timeline_worker_events.hpp"

#include "ddprun/launcher/core/regular_file.hpp"
#include "ddprun/launcher/observe/timeline_format.hpp"
#include "ddprun/proto/json_parse.hpp"

namespace ddprun::launcher {
namespace {

constexpr std::size_t kMaxBytes = 1 << 20;

// In timeline.json a worker's object becomes the args of an event in the
// file's array, two levels deeper: the file then stays within the nesting
// `ddprun timeline` (and Python's json) reads.
constexpr int kMaxEventDepth = proto::kMaxJsonDepth - 2;

}  // namespace

std::optional<WorkerEvent> parseWorkerEvent(const std::string& line, std::string* why) {
  std::string not_json;
  nlohmann::ordered_json parsed =
      proto::parseJson<nlohmann::ordered_json>(line, &not_json, kMaxEventDepth);
  const auto refuse = [why](std::string reason) {
    if (why != nullptr) {
      *why = std::move(reason);
    }
    return std::nullopt;
  };
  if (parsed.is_discarded()) {
    return refuse(not_json);
  }
  if (!parsed.is_object() || !parsed.contains("name") || !parsed["name"].is_string() ||
      !parsed.contains("ts_monotonic_ns") || !parsed["ts_monotonic_ns"].is_number_integer()) {
    return refuse("not an object with a string \"name\" and an integer \"ts_monotonic_ns\"");
  }
  WorkerEvent event;
  event.name = parsed["name"].get<std::string>();
  event.ts_us = parsed["ts_monotonic_ns"].get<std::int64_t>() / 1000;
  if (parsed.contains("dur_ns")) {
    if (!parsed["dur_ns"].is_number_integer() || parsed["dur_ns"].get<std::int64_t>() < 0) {
      return refuse("\"dur_ns\" is not a non-negative integer");
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
  RegularFileRead contents = readRegularFile(file, kMaxBytes, Links::kRefuse);
  read.unreadable = std::move(contents.why);
  read.cut = contents.over_cap;
  const std::string& text = contents.text;
  std::size_t begin = 0;
  for (int number = 1; begin < text.size(); ++number) {
    const std::size_t end = text.find('\n', begin);
    if (end == std::string::npos && read.cut) {
      break;  // a last line the cap cut short
    }
    const std::string line =
        text.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
    begin = end == std::string::npos ? text.size() : end + 1;
    if (line.find_first_not_of(" \t\r") == std::string::npos) {
      continue;
    }
    std::string why;
    if (auto event = parseWorkerEvent(line, &why)) {
      read.events.push_back(std::move(*event));
    } else if (++read.bad_lines == 1) {
      read.first_bad_line = "line " + std::to_string(number) + ": " + why;
    }
  }
  return read;
}

std::string whatWasLeftOut(const WorkerEventsRead& read) {
  if (!read.unreadable.empty()) {
    return "not read: " + read.unreadable;
  }
  std::string said;
  if (read.bad_lines > 0) {
    said = std::to_string(read.bad_lines) + " line(s) are not events (the first, " +
           read.first_bad_line +
           "; each line must be one JSON object with a string \"name\" and an integer "
           "\"ts_monotonic_ns\", nesting at most " +
           std::to_string(kMaxEventDepth) + " levels); they are left out";
  }
  if (read.cut) {
    said += (said.empty() ? "" : "; ") +
            std::string("it is over 1 MiB: only the whole lines of its first MiB are read");
  }
  return said;
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

#include "ddprun/launcher/observe/timeline_format.hpp"

#include <algorithm>
#include <sstream>

#include "ddprun/proto/json_parse.hpp"

namespace ddprun::launcher::timeline {
namespace {

using json = TraceEvent;

std::string_view trimmed(std::string_view text) {
  const auto first = text.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) {
    return {};
  }
  return text.substr(first, text.find_last_not_of(" \t\r\n") - first + 1);
}

// The events of a whole, parsed trace.
std::vector<json> eventsOf(json parsed) {
  if (parsed.is_object() && parsed.contains("traceEvents")) {
    parsed = std::move(parsed["traceEvents"]);
  }
  if (!parsed.is_array()) {
    throw TraceError("not a trace: neither an array of events nor an object with traceEvents");
  }
  return parsed.get<std::vector<json>>();
}

// An array without its "]", in the writer's layout: one event a line, a ","
// before or after it. Only the last line may be cut short.
std::vector<json> eventsOfCutArray(std::string_view text) {
  std::istringstream in{std::string(text)};
  std::vector<std::string> storage;
  for (std::string line; std::getline(in, line);) {
    storage.push_back(std::move(line));
  }
  std::vector<json> events;
  for (std::size_t i = 0; i < storage.size(); ++i) {
    std::string_view line = trimmed(storage[i]);
    if (i == 0 && line.starts_with('[')) {
      line = trimmed(line.substr(1));
    }
    if (line.starts_with(',')) {
      line = trimmed(line.substr(1));
    }
    if (line.ends_with(',')) {
      line = trimmed(line.substr(0, line.size() - 1));
    }
    if (line.empty()) {
      continue;
    }
    std::string why;
    json event = proto::parseJson<json>(line, &why);
    if (event.is_discarded()) {
      const bool last = std::all_of(storage.begin() + static_cast<long>(i) + 1, storage.end(),
                                    [](const std::string& rest) { return trimmed(rest).empty(); });
      if (last && why == proto::kNotJson) {
        break;  // the write the agent's death cut short
      }
      throw TraceError("line " + std::to_string(i + 1) + " is not one whole event: " + why);
    }
    events.push_back(std::move(event));
  }
  return events;
}

}  // namespace

TraceFile parseTrace(std::string_view text) {
  const std::string_view body = trimmed(text);
  if (body.empty()) {
    throw TraceError("empty");
  }
  if (body.front() != '[' && body.front() != '{') {
    throw TraceError("not a trace: it does not start with '[' or '{'");
  }
  TraceFile file;
  std::string why;
  json whole = proto::parseJson<json>(body, &why);
  if (!whole.is_discarded()) {
    file.events = eventsOf(std::move(whole));
    file.closed = true;
  } else if (why == proto::kNotJson && body.front() == '[' && !body.ends_with(']')) {
    file.events = eventsOfCutArray(body);
  } else {
    throw TraceError("not a trace: " + why);
  }
  for (std::size_t i = 0; i < file.events.size(); ++i) {
    const std::string missing = missingFields(file.events[i]);
    if (!missing.empty()) {
      throw TraceError("event " + std::to_string(i + 1) + " has no " + missing);
    }
  }
  return file;
}

std::string missingFields(const json& event) {
  if (!event.is_object()) {
    return "object (not an event)";
  }
  for (const char* name : {"name", "ph"}) {
    if (!event.contains(name) || !event[name].is_string()) {
      return std::string("\"") + name + "\"";
    }
  }
  for (const char* name : {"ts", "pid", "tid"}) {
    if (!event.contains(name) || !event[name].is_number()) {
      return std::string("\"") + name + "\"";
    }
  }
  return "";
}

TraceEvent traceEvent(std::string_view name, char phase, std::int64_t ts, int pid, int tid) {
  TraceEvent event;
  event["name"] = name;
  event["ph"] = std::string(1, phase);
  event["ts"] = ts;
  event["pid"] = pid;
  event["tid"] = tid;
  return event;
}

}  // namespace ddprun::launcher::timeline

#include "ddprun/test_support/trace_check.hpp"

#include <map>
#include <nlohmann/json.hpp>
#include <utility>

namespace ddprun::test_support {
namespace {

using nlohmann::json;

std::string_view trimmed(std::string_view text) {
  const auto first = text.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) {
    return {};
  }
  return text.substr(first, text.find_last_not_of(" \t\r\n") - first + 1);
}

// Every rule but the tracks' nesting, for event number `index`.
void checkFields(const json& event, std::size_t index, std::vector<std::string>& problems) {
  const std::string where = "event " + std::to_string(index + 1) + ": ";
  if (!event.is_object()) {
    problems.push_back(where + "not an object");
    return;
  }
  if (!event.contains("name") || !event["name"].is_string()) {
    problems.push_back(where + "no string name");
  }
  if (!event.contains("ph") || !event["ph"].is_string() ||
      event["ph"].get<std::string>().size() != 1) {
    problems.push_back(where + "no one-letter ph");
    return;
  }
  for (const char* key : {"ts", "pid", "tid"}) {
    if (!event.contains(key) || !event[key].is_number()) {
      problems.push_back(where + "no number " + key);
    }
  }
  const std::string ph = event["ph"];
  if (ph == "X" &&
      (!event.contains("dur") || !event["dur"].is_number() || event["dur"].get<double>() < 0)) {
    problems.push_back(where + "X without a dur >= 0");
  }
  if (ph == "i" && (!event.contains("s") || !event["s"].is_string() ||
                    std::string("gpt").find(event["s"].get<std::string>()) == std::string::npos ||
                    event["s"].get<std::string>().size() != 1)) {
    problems.push_back(where + "i without a scope s of g, p or t");
  }
  if (ph == "M") {
    const std::string name = event.value("name", "");
    const bool naming = name == "process_name" || name == "thread_name";
    const bool sorting = name == "process_sort_index" || name == "thread_sort_index";
    if (!naming && !sorting) {
      problems.push_back(where + "M named '" + name + "', which no viewer knows");
    } else if (!event.contains("args") || !event["args"].is_object() ||
               (naming && !event["args"].value("name", json()).is_string()) ||
               (sorting && !event["args"].value("sort_index", json()).is_number_integer())) {
      problems.push_back(where + "M " + name + " without its args");
    }
  }
}

}  // namespace

TraceCheck checkTrace(std::string_view text) {
  TraceCheck check;
  std::string body(trimmed(text));
  if (body.empty() || body.front() != '[') {
    check.problems.push_back("does not start with '['");
    return check;
  }
  check.closed = body.back() == ']';
  if (!check.closed) {
    if (body.back() == ',') {
      body.pop_back();
    }
    body += "]";
  }
  const json events = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (events.is_discarded() || !events.is_array()) {
    check.problems.push_back(check.closed ? "not a JSON array"
                                          : "not a JSON array even with its ']' added");
    return check;
  }
  check.events = static_cast<int>(events.size());
  std::map<std::pair<double, double>, std::vector<std::string>> open;  // (pid, tid) -> B names
  std::map<std::pair<double, double>, double> last_ts;
  for (std::size_t i = 0; i < events.size(); ++i) {
    const std::size_t before = check.problems.size();
    checkFields(events[i], i, check.problems);
    if (check.problems.size() != before) {
      continue;
    }
    const json& event = events[i];
    const std::string ph = event["ph"];
    const bool on_track = ph == "B" || ph == "E" || (ph == "i" && event["s"] == "t");
    if (!on_track) {
      continue;
    }
    const auto track = std::make_pair(event["pid"].get<double>(), event["tid"].get<double>());
    const double ts = event["ts"].get<double>();
    if (last_ts.contains(track) && ts < last_ts[track]) {
      check.problems.push_back("event " + std::to_string(i + 1) +
                               ": goes back in time on its track");
    }
    last_ts[track] = ts;
    if (ph == "B") {
      open[track].push_back(event["name"]);
    } else if (ph == "E") {
      if (open[track].empty()) {
        check.problems.push_back("event " + std::to_string(i + 1) + ": E with no B open");
      } else {
        open[track].pop_back();
      }
    }
  }
  for (const auto& [track, names] : open) {
    check.open_slices += static_cast<int>(names.size());
  }
  return check;
}

std::vector<nlohmann::json> traceEvents(std::string_view text) {
  std::string body(text);
  while (!body.empty() && (body.back() == '\n' || body.back() == ',')) {
    body.pop_back();
  }
  if (body.empty()) {
    return {};
  }
  if (body.back() != ']') {
    body += "]";
  }
  const auto parsed = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  return parsed.is_array() ? parsed.get<std::vector<nlohmann::json>>()
                           : std::vector<nlohmann::json>{};
}

std::vector<nlohmann::json> eventsNamed(const std::vector<nlohmann::json>& all,
                                        const std::string& name, int pid) {
  std::vector<nlohmann::json> found;
  for (const nlohmann::json& event : all) {
    if (event.value("name", "") == name && (pid < 0 || event.value("pid", -1) == pid)) {
      found.push_back(event);
    }
  }
  return found;
}

}  // namespace ddprun::test_support

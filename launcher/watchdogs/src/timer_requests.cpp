#include "ddprun/launcher/watchdogs/timer_requests.hpp"

#include <algorithm>
#include <climits>
#include <nlohmann/json.hpp>

#include "ddprun/proto/json_parse.hpp"

namespace ddprun::launcher {

std::variant<TimerRequest, std::string> parseTimerRequest(std::string_view line) {
  std::string why;
  const auto json = proto::parseJson(line, &why);
  if (json.is_discarded() && why != proto::kNotJson) {
    return why;
  }
  if (json.is_discarded() || !json.is_object()) {
    return std::string("not a JSON object");
  }
  for (const char* key : {"pid", "scope_id", "expiration_time", "signal"}) {
    if (!json.contains(key)) {
      return std::string("no \"") + key + "\"";
    }
  }
  const auto& pid = json["pid"];
  if (!pid.is_number_integer() || pid.get<long long>() <= 0 || pid.get<long long>() > INT_MAX) {
    return std::string("\"pid\" is not a process id");
  }
  if (!json["scope_id"].is_string()) {
    return std::string("\"scope_id\" is not a string");
  }
  if (!json["expiration_time"].is_number()) {
    return std::string("\"expiration_time\" is not a number");
  }
  const auto& signal = json["signal"];
  if (!signal.is_number_integer() || signal.get<long long>() > INT_MAX ||
      signal.get<long long>() < INT_MIN) {
    return std::string("\"signal\" is not an integer");
  }
  TimerRequest request;
  request.pid = static_cast<pid_t>(pid.get<long long>());
  request.scope_id = json["scope_id"].get<std::string>();
  request.expiration_time = json["expiration_time"].get<double>();
  request.signal = static_cast<int>(signal.get<long long>());
  return request;
}

const TimerRequest* ExpiredTimers::reaping() const {
  for (const TimerRequest& timer : timers) {
    if (timer.signal > 0) {
      return &timer;
    }
  }
  return nullptr;
}

void TimerTable::apply(const TimerRequest& request) {
  auto key = std::make_pair(request.pid, request.scope_id);
  if (request.release()) {
    timers_.erase(key);
  } else {
    timers_.insert_or_assign(std::move(key), request);
  }
}

std::vector<ExpiredTimers> TimerTable::takeExpired(double now) {
  std::vector<ExpiredTimers> expired;
  for (const auto& [key, timer] : timers_) {
    if (timer.expiration_time > now) {
      continue;
    }
    if (expired.empty() || expired.back().pid != timer.pid) {
      expired.push_back({timer.pid, {}});  // the map is ordered by pid first
    }
    expired.back().timers.push_back(timer);
  }
  for (ExpiredTimers& of_pid : expired) {
    std::stable_sort(of_pid.timers.begin(), of_pid.timers.end(),
                     [](const TimerRequest& a, const TimerRequest& b) {
                       return a.expiration_time < b.expiration_time;
                     });
    std::erase_if(timers_, [&](const auto& entry) { return entry.first.first == of_pid.pid; });
  }
  return expired;
}

std::optional<double> TimerTable::nextExpiration() const {
  std::optional<double> earliest;
  for (const auto& [key, timer] : timers_) {
    if (!earliest || timer.expiration_time < *earliest) {
      earliest = timer.expiration_time;
    }
  }
  return earliest;
}

}  // namespace ddprun::launcher

#include "restart_phases.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>

namespace ddprun::bench {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// ddprun writes its log directory under $TMPDIR, which launch_bench points at
// the run's own directory.
std::optional<fs::path> findTimeline(const fs::path& run_dir) {
  std::error_code error;
  for (fs::recursive_directory_iterator it(run_dir, error), end; !error && it != end;
       it.increment(error)) {
    if (it->path().filename() == "timeline.json") {
      return it->path();
    }
  }
  return std::nullopt;
}

bool isWorkerSlice(const json& event, char phase) {
  return event.value("ph", "") == std::string(1, phase) &&
         event.value("name", "").rfind("rank ", 0) == 0;
}

// The agent's moments, in µs of CLOCK_MONOTONIC; NaN where not seen.
struct AgentMoments {
  static constexpr double kNone = std::numeric_limits<double>::quiet_NaN();
  double failure_seen = kNone;
  double restart = kNone;
  double last_reaped = kNone;
  double round_joined = kNone;
  double first_spawned = kNone;
  double last_spawned = kNone;
};

void minInto(double& into, double value) {
  into = std::isnan(into) ? value : std::min(into, value);
}
void maxInto(double& into, double value) {
  into = std::isnan(into) ? value : std::max(into, value);
}

// Events before the "restart" instant belong to the crashed round, those
// after it to the replacement's; the file lists them in the order they
// happened.
AgentMoments readMoments(const json& events) {
  AgentMoments moments;
  for (const auto& event : events) {
    if (!event.is_object() || !event.contains("ts")) {
      continue;
    }
    const double ts = event["ts"].get<double>();
    const std::string name = event.value("name", "");
    const bool after_restart = !std::isnan(moments.restart);
    if (!after_restart) {
      if (name == "worker failed" && std::isnan(moments.failure_seen)) {
        moments.failure_seen = ts;
      } else if (name == "restart") {
        moments.restart = ts;
      } else if (isWorkerSlice(event, 'E')) {
        maxInto(moments.last_reaped, ts);
      }
      continue;
    }
    if (name == "rendezvous" && event.value("ph", "") == "E" && std::isnan(moments.round_joined)) {
      moments.round_joined = ts;
    } else if (isWorkerSlice(event, 'B')) {
      minInto(moments.first_spawned, ts);
      maxInto(moments.last_spawned, ts);
    }
  }
  return moments;
}

}  // namespace

std::string_view restartPhaseName(RestartPhase phase) {
  switch (phase) {
    case RestartPhase::FailureSeen:
      return "agent sees the crash";
    case RestartPhase::SurvivorsSignalled:
      return "first survivor gets SIGTERM";
    case RestartPhase::SurvivorsReaped:
      return "last survivor reaped";
    case RestartPhase::RoundJoined:
      return "next round decided";
    case RestartPhase::FirstSpawned:
      return "first replacement spawned";
    case RestartPhase::LastSpawned:
      return "last replacement spawned";
    case RestartPhase::FirstRuns:
      return "first replacement runs";
    case RestartPhase::LastRuns:
      return "last replacement runs";
  }
  return "?";
}

int restartPhaseStart(RestartPhase phase) {
  switch (phase) {
    case RestartPhase::FirstRuns:
      return static_cast<int>(RestartPhase::FirstSpawned);
    case RestartPhase::LastRuns:
      return static_cast<int>(RestartPhase::LastSpawned);
    default:
      return static_cast<int>(phase) - 1;
  }
}

std::optional<RestartTimes> readRestartTimes(const fs::path& run_dir, const RestartStamps& stamps) {
  const auto path = findTimeline(run_dir);
  if (!path || !stamps.first_term_ms) {
    return std::nullopt;
  }
  std::ifstream in(*path);
  const json events = json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!events.is_array()) {
    return std::nullopt;
  }
  const AgentMoments agent = readMoments(events);
  auto after_crash = [&stamps](double us) {
    return (us * 1000.0 - static_cast<double>(stamps.crash_ns)) / 1e6;
  };
  // No rendezvous slice after the restart: the round was decided at once.
  const double joined = std::isnan(agent.round_joined) ? agent.restart : agent.round_joined;
  RestartTimes times{after_crash(agent.failure_seen),
                     *stamps.first_term_ms,
                     after_crash(agent.last_reaped),
                     after_crash(joined),
                     after_crash(agent.first_spawned),
                     after_crash(agent.last_spawned),
                     stamps.first_start_ms,
                     stamps.last_start_ms};
  if (std::any_of(times.begin(), times.end(), [](double t) { return std::isnan(t); })) {
    return std::nullopt;
  }
  return times;
}

}  // namespace ddprun::bench

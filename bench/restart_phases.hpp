// Where one ddprun restart's time goes, between a worker's crash and the last
// replacement's first line: the agent's own moments, read back from the
// timeline.json it wrote during the run (its `ts` is CLOCK_MONOTONIC in µs,
// the clock of the workers' stamps), put between the workers' stamps.
// Stateless.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string_view>

#include "run_files.hpp"

namespace ddprun::bench {

// The phases in the order a restart passes them; each figure is ms after the
// crash stamp.
enum class RestartPhase {
  FailureSeen,         // the agent saw the crashed worker exit ("worker failed")
  SurvivorsSignalled,  // the first surviving worker got SIGTERM (its own stamp)
  SurvivorsReaped,     // the agent reaped the last survivor (its slice ended)
  RoundJoined,         // the agent's next rendezvous round was decided
  FirstSpawned,        // the agent started the first replacement
  LastSpawned,         // ... and the last one
  FirstRuns,           // the first replacement's own first stamp
  LastRuns,            // the last replacement's (the restart's end)
};
inline constexpr std::size_t kRestartPhaseCount = 8;
using RestartTimes = std::array<double, kRestartPhaseCount>;

// A short name per phase, as the report's column heads.
std::string_view restartPhaseName(RestartPhase phase);

// What a phase's own length is counted from: the phase before it, but for a
// replacement's first stamp its own spawn (the spawns overlap the runs); -1:
// from the crash.
int restartPhaseStart(RestartPhase phase);

// The run's phases: the workers' stamps (`stamps`, read from its files) and
// the agent's events from the first timeline.json under `run_dir`. Empty if
// there is no timeline, it does not parse, or a phase is missing from it (a
// run without a restart, or without a term stamp).
std::optional<RestartTimes> readRestartTimes(const std::filesystem::path& run_dir,
                                             const RestartStamps& stamps);

}  // namespace ddprun::bench

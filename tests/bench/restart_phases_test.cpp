// launch_bench's restart phases read back from an agent's timeline.json: the
// crashed round's moments before the "restart" instant, the replacement's
// after it, all put on the crash stamp's clock; a file that lacks a phase
// gives nothing rather than a wrong figure.
#include "restart_phases.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "ddprun/test_support/temp_dir.hpp"

namespace ddprun::bench {
namespace {

namespace fs = std::filesystem;

// A timeline as the agent writes it (µs), under a log directory in `dir`.
void writeTimeline(const fs::path& dir, const std::string& events) {
  const fs::path run = dir / "ddprun_x" / "none_y";
  fs::create_directories(run);
  std::ofstream(run / "timeline.json") << "[\n" << events << "\n]\n";
}

constexpr char kRestart[] = R"(
{"name":"rank 0","ph":"B","ts":1000,"pid":1,"tid":10},
{"name":"rank 1","ph":"B","ts":1100,"pid":1,"tid":11},
{"name":"rank 0","ph":"E","ts":2001000,"pid":1,"tid":10},
{"name":"worker failed","ph":"i","ts":2001000,"pid":1,"tid":1},
{"name":"stop workers","ph":"i","ts":2001100,"pid":1,"tid":1},
{"name":"rank 1","ph":"E","ts":2003000,"pid":1,"tid":11},
{"name":"restart","ph":"i","ts":2003200,"pid":1,"tid":1},
{"name":"rendezvous","ph":"B","ts":2003200,"pid":1,"tid":2},
{"name":"rendezvous","ph":"E","ts":2003500,"pid":1,"tid":2},
{"name":"rank 0","ph":"B","ts":2004000,"pid":1,"tid":10},
{"name":"rank 1","ph":"B","ts":2006000,"pid":1,"tid":11})";

// The crash stamp at 2 s (ns), the workers' own stamps relative to it.
RestartStamps stamps() {
  RestartStamps s;
  s.crash_ns = 2'000'000'000;
  s.first_term_ms = 1.5;
  s.first_start_ms = 7.0;
  s.last_start_ms = 9.0;
  return s;
}

TEST(RestartPhasesTest, EachPhaseIsMsAfterTheCrash) {
  test_support::TempDir dir("restart_phases");
  writeTimeline(dir.path(), kRestart);
  const auto times = readRestartTimes(dir.path(), stamps());
  ASSERT_TRUE(times.has_value());
  const RestartTimes expected{1.0, 1.5, 3.0, 3.5, 4.0, 6.0, 7.0, 9.0};
  for (std::size_t phase = 0; phase < kRestartPhaseCount; ++phase) {
    EXPECT_DOUBLE_EQ((*times)[phase], expected[phase])
        << restartPhaseName(static_cast<RestartPhase>(phase));
  }
}

TEST(RestartPhasesTest, AReplacementsRunIsCountedFromItsOwnSpawn) {
  EXPECT_EQ(restartPhaseStart(RestartPhase::FirstRuns),
            static_cast<int>(RestartPhase::FirstSpawned));
  EXPECT_EQ(restartPhaseStart(RestartPhase::LastRuns), static_cast<int>(RestartPhase::LastSpawned));
  EXPECT_EQ(restartPhaseStart(RestartPhase::SurvivorsReaped),
            static_cast<int>(RestartPhase::SurvivorsSignalled));
  EXPECT_EQ(restartPhaseStart(RestartPhase::FailureSeen), -1);
}

TEST(RestartPhasesTest, ARunWithoutARestartOrATimelineGivesNothing) {
  test_support::TempDir none("restart_phases");
  EXPECT_FALSE(readRestartTimes(none.path(), stamps()).has_value()) << "no timeline.json";
  test_support::TempDir no_restart("restart_phases");
  writeTimeline(no_restart.path(), R"({"name":"rank 0","ph":"B","ts":1000,"pid":1,"tid":10})");
  EXPECT_FALSE(readRestartTimes(no_restart.path(), stamps()).has_value());
  test_support::TempDir torn("restart_phases");
  writeTimeline(torn.path(), R"({"name":"restart","ph":"i")");
  EXPECT_FALSE(readRestartTimes(torn.path(), stamps()).has_value()) << "does not parse";
}

}  // namespace
}  // namespace ddprun::bench

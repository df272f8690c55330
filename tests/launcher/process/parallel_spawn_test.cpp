// ParallelSpawn with real processes: every member of a group started and
// returned in its order, a member that cannot start reported without
// stopping the others, members started on the object's own thread still
// running after the group's start returns (their death signal follows the
// thread that started them), groups started one after another, and groups
// started after finish() ended the thread.
#include "ddprun/launcher/process/parallel_spawn.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

namespace ddprun::launcher {
namespace {

using std::chrono::milliseconds;

SpawnOptions shell(const std::string& script) {
  SpawnOptions options;
  options.argv = {"/bin/sh", "-c", script};
  options.env = {{"PATH", "/usr/bin:/bin"}};
  return options;
}

std::vector<SpawnOptions> exitingWithTheirIndex(int count) {
  std::vector<SpawnOptions> group;
  group.reserve(static_cast<std::size_t>(count));
  for (int i = 0; i < count; ++i) {
    group.push_back(shell("exit " + std::to_string(10 + i)));
  }
  return group;
}

// Each started member exits with 10 + its index: the outcomes are in the
// group's order, one process each.
void expectExitCodesInOrder(std::vector<SpawnOutcome>& outcomes) {
  for (std::size_t i = 0; i < outcomes.size(); ++i) {
    ASSERT_FALSE(outcomes[i].error) << "member " << i;
    ASSERT_TRUE(outcomes[i].process.has_value()) << "member " << i;
    EXPECT_EQ(outcomes[i].process->wait(),
              (ExitStatus{ExitStatus::Kind::Exited, 10 + static_cast<int>(i)}))
        << "member " << i;
  }
}

TEST(ParallelSpawnTest, StartsEveryMemberAndReturnsThemInOrder) {
  ParallelSpawn spawn;
  for (int count : {1, 2, 5, 8}) {
    std::vector<SpawnOutcome> outcomes = spawn.startAll(exitingWithTheirIndex(count));
    ASSERT_EQ(outcomes.size(), static_cast<std::size_t>(count));
    expectExitCodesInOrder(outcomes);
  }
}

// The SpawnError's line, or "" when `error` holds another exception.
std::string spawnErrorLine(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const SpawnError& spawn_error) {
    return spawn_error.what();
  } catch (...) {
    return "";
  }
}

TEST(ParallelSpawnTest, AMemberThatCannotStartIsReportedAndTheOthersStart) {
  ParallelSpawn spawn;
  std::vector<SpawnOptions> group = exitingWithTheirIndex(4);
  group[1].argv = {"ddprun-no-such-program"};
  std::vector<SpawnOutcome> outcomes = spawn.startAll(group);
  ASSERT_TRUE(outcomes[1].error);
  EXPECT_FALSE(outcomes[1].process.has_value());
  const std::string line = spawnErrorLine(outcomes[1].error);
  EXPECT_NE(line.find("ddprun-no-such-program"), std::string::npos) << line;
  for (std::size_t i : {0U, 2U, 3U}) {
    ASSERT_TRUE(outcomes[i].process.has_value()) << "member " << i;
    EXPECT_EQ(outcomes[i].process->wait().code, 10 + static_cast<int>(i));
  }
}

// Each member still runs a while after the start returned; then stopped.
void expectEveryMemberStillRunning(std::vector<SpawnOutcome> outcomes) {
  for (SpawnOutcome& outcome : outcomes) {
    ASSERT_TRUE(outcome.process.has_value());
    EXPECT_FALSE(outcome.process->waitFor(milliseconds(300)).has_value())
        << "a member ended: " << outcome.process->exitStatus()->describe();
  }
  for (SpawnOutcome& outcome : outcomes) {
    outcome.process->stop(milliseconds(0));
  }
}

// Member 1 is started on the ParallelSpawn's thread. Had that thread ended
// with the group's start, the kernel would have sent its child the death
// signal (SIGKILL) then.
TEST(ParallelSpawnTest, MembersStartedOnItsThreadOutliveTheStart) {
  ParallelSpawn spawn;
  expectEveryMemberStillRunning(spawn.startAll({shell("sleep 30"), shell("sleep 30")}));
}

// finish() ends the thread without waiting for it; a group started after it
// still starts, on the caller's thread, and outlives its start.
TEST(ParallelSpawnTest, AGroupAfterFinishStartsOnTheCallersThread) {
  ParallelSpawn spawn;
  std::vector<SpawnOutcome> first = spawn.startAll(exitingWithTheirIndex(2));
  expectExitCodesInOrder(first);
  spawn.finish();
  expectEveryMemberStillRunning(spawn.startAll({shell("sleep 30"), shell("sleep 30")}));
}

}  // namespace
}  // namespace ddprun::launcher

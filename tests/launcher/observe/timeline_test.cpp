// The timeline's file, read back with no agent: the writer's output checked
// against the trace event format (test_support::checkTrace) whole and cut
// short, a cut file read up to its last whole event, a worker's own events
// lines, and the merger's arithmetic: each node shifted by the offset it
// measured, a later measurement holding from its time on, and the hosts'
// wall clocks only when the offsets cannot be used.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <thread>

#include "ddprun/launcher/config/worker_environment.hpp"
#include "ddprun/launcher/observe/timeline_format.hpp"
#include "ddprun/launcher/observe/timeline_merge.hpp"
#include "ddprun/launcher/observe/timeline_worker_events.hpp"
#include "ddprun/launcher/observe/timeline_writer.hpp"
#include "ddprun/test_support/files.hpp"
#include "ddprun/test_support/temp_dir.hpp"
#include "ddprun/test_support/trace_check.hpp"

namespace ddprun::launcher {
namespace {

using namespace std::chrono_literals;
using json = timeline::TraceEvent;
using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

std::string joined(const std::vector<std::string>& lines) {
  std::string text;
  for (const auto& line : lines) {
    text += line + "\n";
  }
  return text;
}

// The events named `name`, in file order.
std::vector<json> named(const std::vector<json>& events, const std::string& name) {
  std::vector<json> found;
  std::copy_if(events.begin(), events.end(), std::back_inserter(found),
               [&](const json& event) { return event["name"] == name; });
  return found;
}

class TimelineWriterTest : public ::testing::Test {
 protected:
  // One round of two workers, one of which fails, each call at the time it
  // is made (as the agent makes them); the text as it stands.
  std::string writeOneFailedRound(TimelineWriter& writer) {
    writer.rendezvousStarted(Clock::now());
    WorkerGroup group;
    group.world_size = 2;
    writer.roundJoined(group, 1ms, Clock::now());
    writer.clockMeasured({250us, 40us, "c10d rendezvous at node0:29400"});
    writer.workerStarted(0, 0, 101, Clock::now());
    writer.workerStarted(1, 1, 102, Clock::now());
    writer.workerExited(1, 1, 102, {ExitStatus::Kind::Exited, 3}, true, Clock::now());
    writer.groupStopping(AgentEvents::StopReason::kFailure, Clock::now());
    writer.workerExited(0, 0, 101, {ExitStatus::Kind::Signaled, 15}, false, Clock::now());
    return test_support::readFile(path_);
  }

  test_support::TempDir dir_{"ddprun-timeline-test"};
  fs::path path_ = dir_ / "timeline.json";
};

TEST_F(TimelineWriterTest, ItsFileIsATraceWhileTheAgentRunsAndOnceItHasEnded) {
  TimelineWriter writer(path_, {"node0", "job", {}});
  ASSERT_TRUE(writer.writing());
  const std::string running = writeOneFailedRound(writer);
  const test_support::TraceCheck open = test_support::checkTrace(running);
  EXPECT_TRUE(open.problems.empty()) << joined(open.problems) << running;
  EXPECT_FALSE(open.closed) << "no ']' until the agent ends: " << running;
  EXPECT_EQ(open.open_slices, 1) << "round 0 is still open: " << running;

  writer.finished(1, Clock::now());
  writer.close(1);
  const std::string ended = test_support::readFile(path_);
  const test_support::TraceCheck closed = test_support::checkTrace(ended);
  EXPECT_TRUE(closed.problems.empty()) << joined(closed.problems) << ended;
  EXPECT_TRUE(closed.closed);
  EXPECT_EQ(closed.open_slices, 0) << ended;
  // Strict JSON as it is, and the reader agrees.
  const nlohmann::json strict = nlohmann::json::parse(ended);
  const timeline::TraceFile read = timeline::parseTrace(ended);
  EXPECT_TRUE(read.closed);
  EXPECT_EQ(read.events.size(), strict.size());
}

TEST_F(TimelineWriterTest, AWorkersExitCarriesItsCodeOrSignalAndAFailureIsAnInstant) {
  TimelineWriter writer(path_, {"node0", "job", {}});
  const timeline::TraceFile read = timeline::parseTrace(writeOneFailedRound(writer));
  const auto rank1 = named(read.events, "rank 1");
  ASSERT_EQ(rank1.size(), 2u);
  EXPECT_EQ(rank1[0]["args"]["pid"], 102);
  EXPECT_EQ(rank1[1]["ph"], "E");
  EXPECT_EQ(rank1[1]["args"]["exit_code"], 3);
  EXPECT_EQ(rank1[1]["args"]["failed"], true);
  const auto rank0 = named(read.events, "rank 0");
  ASSERT_EQ(rank0.size(), 2u);
  EXPECT_EQ(rank0[1]["args"]["signal"], "SIGTERM");
  EXPECT_EQ(rank0[1]["args"]["failed"], false);
  const auto failures = named(read.events, "worker failed");
  ASSERT_EQ(failures.size(), 1u);
  EXPECT_EQ(failures[0]["args"]["rank"], 1);
  EXPECT_EQ(named(read.events, "stop workers").at(0)["args"]["reason"], "failure");
  const auto clock = named(read.events, std::string(timeline::kClockOffset));
  ASSERT_EQ(clock.size(), 1u);
  EXPECT_EQ(clock[0]["args"]["clock_offset_us"], 250.0);
  EXPECT_EQ(clock[0]["args"]["clock_uncertainty_us"], 40.0);
}

// A hang names its rank, why, and where every rank's stacks went.
TEST_F(TimelineWriterTest, AHungWorkerIsAnInstantNamingItsRankAndTheStacks) {
  {
    TimelineWriter writer(path_, {"node0", "job", {}});
    writer.workerHung(1, 3, "hung: no progress for 4 s after step 11", "node 1: h1: stacks",
                      Clock::now());
  }
  const timeline::TraceFile read = timeline::parseTrace(test_support::readFile(path_));
  const auto hung = named(read.events, "worker hung");
  ASSERT_EQ(hung.size(), 1u);
  EXPECT_EQ(hung[0]["args"]["rank"], 3);
  EXPECT_EQ(hung[0]["args"]["local_rank"], 1);
  EXPECT_EQ(hung[0]["args"]["reason"], "hung: no progress for 4 s after step 11");
  EXPECT_EQ(hung[0]["args"]["stacks"], "node 1: h1: stacks");
}

TEST_F(TimelineWriterTest, AWorkersOwnEventsAreFoldedInWhenItExits) {
  const fs::path events_dir = dir_ / "worker_events";
  TimelineWriter writer(path_, {"node0", "job", events_dir});
  ASSERT_TRUE(fs::is_directory(events_dir));
  const Clock::time_point t0 = Clock::now();
  writer.rendezvousStarted(t0);
  WorkerGroup group;
  group.attempt = 4;
  writer.roundJoined(group, 0ms, t0);
  writer.workerStarted(0, 0, 101, t0);
  const auto ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>((t0 + 3ms).time_since_epoch()).count();
  std::ofstream(timelineEventsFile(events_dir, 4, 0))
      << R"({"name": "snapshot", "ts_monotonic_ns": )" << ns
      << R"(, "dur_ns": 2000000, "epoch": 7})"
      << "\n"
      << "not json\n";
  writer.workerExited(0, 0, 101, {ExitStatus::Kind::Exited, 0}, false, t0 + 9ms);
  const timeline::TraceFile read = timeline::parseTrace(test_support::readFile(path_));
  const auto snapshots = named(read.events, "snapshot");
  ASSERT_EQ(snapshots.size(), 1u);
  EXPECT_EQ(snapshots[0]["ph"], "X");
  EXPECT_EQ(snapshots[0]["ts"], timeline::microseconds(t0 + 3ms));
  EXPECT_EQ(snapshots[0]["dur"], 2000);
  EXPECT_EQ(snapshots[0]["tid"], timeline::reportedTrack(0));
  EXPECT_EQ(snapshots[0]["args"]["epoch"], 7);
  EXPECT_EQ(snapshots[0]["args"]["round"], 4);
}

TEST(TimelineFormatTest, ACutFileIsReadUpToItsLastWholeEvent) {
  const std::string whole =
      "[\n"
      R"({"name":"a","ph":"i","s":"t","ts":1,"pid":7,"tid":1})"
      "\n,"
      R"({"name":"b","ph":"B","ts":2,"pid":7,"tid":2})"
      "\n,";
  const timeline::TraceFile cut = timeline::parseTrace(whole + R"({"name":"c","ph":"E","ts)");
  EXPECT_FALSE(cut.closed);
  ASSERT_EQ(cut.events.size(), 2u);
  EXPECT_EQ(cut.events[1]["name"], "b");
  EXPECT_EQ(timeline::parseTrace(whole).events.size(), 2u);
  EXPECT_THROW(timeline::parseTrace("[\n{garbage}\n," + whole.substr(2)), timeline::TraceError);
  EXPECT_THROW(timeline::parseTrace("hello"), timeline::TraceError);
  EXPECT_THROW(timeline::parseTrace(R"([{"name":"a","ph":"i","ts":1,"pid":7}])"),
               timeline::TraceError);  // no tid
}

TEST(TimelineFormatTest, AWorkersEventLineNeedsANameAndAnIntegerTime) {
  const auto event =
      parseWorkerEvent(R"({"name":"snapshot","ts_monotonic_ns":5000,"dur_ns":3000,"epoch":2})");
  ASSERT_TRUE(event);
  EXPECT_EQ(event->name, "snapshot");
  EXPECT_EQ(event->ts_us, 5);
  EXPECT_EQ(event->dur_us, 3);
  EXPECT_EQ(event->args, nlohmann::ordered_json({{"epoch", 2}}));
  EXPECT_FALSE(parseWorkerEvent(R"({"ts_monotonic_ns":5000})"));
  EXPECT_FALSE(parseWorkerEvent(R"({"name":"x","ts_monotonic_ns":5.5})"));
  EXPECT_FALSE(parseWorkerEvent(R"({"name":"x","ts_monotonic_ns":5,"dur_ns":-1})"));
  EXPECT_FALSE(parseWorkerEvent("[1, 2]"));
  std::string why;
  EXPECT_FALSE(parseWorkerEvent(R"({"name":"x","ts_monotonic_ns":5,"dur_ns":-1})", &why));
  EXPECT_EQ(why, "\"dur_ns\" is not a non-negative integer");
}

// Nested past the bound a line is no event: copied into timeline.json, its
// args would make the file too deep for `ddprun timeline` (and Python's
// json) to read, and 50,000 levels would end the agent copying them.
TEST(TimelineFormatTest, AWorkersEventLineNestingPastTheBoundIsNoEvent) {
  const auto nested = [](int depth) {  // the event object and depth - 1 arrays in it
    const auto arrays = static_cast<std::size_t>(depth - 1);
    return R"({"name":"x","ts_monotonic_ns":5,"a":)" + std::string(arrays, '[') +
           std::string(arrays, ']') + "}";
  };
  EXPECT_TRUE(parseWorkerEvent(nested(62)));
  std::string why;
  EXPECT_FALSE(parseWorkerEvent(nested(63), &why));
  EXPECT_EQ(why, "nested deeper than 62 levels");
  EXPECT_FALSE(parseWorkerEvent(nested(50'000), &why));
  EXPECT_EQ(why, "nested deeper than 62 levels");
}

// The worker controls what lies at its events path, and the agent reads it
// on its loop thread: each read below runs in a child process with a
// deadline and an address-space limit, so a read that blocks or grows
// without bound fails the test instead of hanging or exhausting it.
class WorkerEventsFileTest : public ::testing::Test {
 protected:
  // "" when `read` returned true in time within 256 MiB more than the test
  // has now; else what went wrong.
  static std::string inBoundedChild(const std::function<bool()>& read) {
    const pid_t child = ::fork();
    if (child == 0) {
      rlimit limit{};
      ::getrlimit(RLIMIT_AS, &limit);
      limit.rlim_cur = mappedBytes() + (256u << 20);
      ::setrlimit(RLIMIT_AS, &limit);
      bool ok = false;
      try {
        ok = read();
      } catch (...) {
        ::_exit(3);
      }
      ::_exit(ok ? 0 : 1);
    }
    const auto deadline = Clock::now() + 10s;
    int status = 0;
    while (::waitpid(child, &status, WNOHANG) == 0) {
      if (Clock::now() > deadline) {
        ::kill(child, SIGKILL);
        ::waitpid(child, &status, 0);
        return "the read did not return within 10 s";
      }
      std::this_thread::sleep_for(5ms);  // polling the child, not waiting a fixed time
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
      return "";
    }
    return WIFEXITED(status) ? "the read ended with " + std::to_string(WEXITSTATUS(status))
                             : "the read was killed by signal " + std::to_string(WTERMSIG(status));
  }

  // The process' mapped bytes now (/proc/self/statm's first field).
  static std::size_t mappedBytes() {
    std::ifstream statm("/proc/self/statm");
    std::size_t pages = 0;
    statm >> pages;
    return pages * static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  }

  test_support::TempDir dir_{"ddprun-worker-events-test"};
  fs::path path_ = dir_ / "events.jsonl";
};

TEST_F(WorkerEventsFileTest, AFifoAtThePathIsSkippedWithoutBlocking) {
  ASSERT_EQ(::mkfifo(path_.c_str(), 0600), 0);
  EXPECT_EQ(inBoundedChild([&] {
              const WorkerEventsRead read = readWorkerEvents(path_);
              return read.events.empty() && read.bad_lines == 0 && !read.unreadable.empty();
            }),
            "");
}

TEST_F(WorkerEventsFileTest, ALinkToDevZeroIsSkippedInBoundedMemory) {
  fs::create_symlink("/dev/zero", path_);
  EXPECT_EQ(inBoundedChild([&] {
              const WorkerEventsRead read = readWorkerEvents(path_);
              return read.events.empty() && read.bad_lines == 0 && !read.unreadable.empty();
            }),
            "");
}

TEST_F(WorkerEventsFileTest, AFileOverAMebibyteIsCutThereDroppingTheLineItCuts) {
  const std::string line = R"({"name":"step","ts_monotonic_ns":1000,"pad":"xxxxxxxxxxxxxxxxx"})";
  const std::size_t line_bytes = line.size() + 1;
  const std::size_t whole_lines = (1u << 20) / line_bytes;
  ASSERT_NE((1u << 20) % line_bytes, 0u) << "the cap must cut a line for this test";
  {
    std::ofstream out(path_);
    for (std::size_t i = 0; i < whole_lines + 100; ++i) {
      out << line << "\n";
    }
  }
  const WorkerEventsRead read = readWorkerEvents(path_);
  EXPECT_EQ(read.events.size(), whole_lines);
  EXPECT_EQ(read.bad_lines, 0);
  EXPECT_TRUE(read.unreadable.empty()) << read.unreadable;
  EXPECT_TRUE(read.cut);
  EXPECT_EQ(whatWasLeftOut(read),
            "it is over 1 MiB: only the whole lines of its first MiB are read");

  // One line longer than the cap: nothing of it.
  std::ofstream(path_) << R"({"name":"big","ts_monotonic_ns":1,"pad":")"
                       << std::string(2 << 20, 'x') << "\"}\n";
  const WorkerEventsRead big = readWorkerEvents(path_);
  EXPECT_TRUE(big.events.empty());
  EXPECT_EQ(big.bad_lines, 0) << "the cut line is dropped, not counted as a bad one";
}

// Exactly a MiB is within the cap: its last line, even unended, is whole.
TEST_F(WorkerEventsFileTest, AFileOfExactlyAMebibyteIsReadWhole) {
  std::string text = R"({"name":"first","ts_monotonic_ns":1,"pad":")";
  const std::string last =
      "\"}\n"
      R"({"name":"last","ts_monotonic_ns":2})";
  text += std::string((1u << 20) - text.size() - last.size(), 'x') + last;
  ASSERT_EQ(text.size(), 1u << 20);
  std::ofstream(path_) << text;
  const WorkerEventsRead read = readWorkerEvents(path_);
  EXPECT_FALSE(read.cut);
  ASSERT_EQ(read.events.size(), 2u);
  EXPECT_EQ(read.events[1].name, "last");
}

TEST_F(WorkerEventsFileTest, WhatIsLeftOutSaysWhichLineAndWhy) {
  std::ofstream(path_) << R"({"name":"ok","ts_monotonic_ns":1})"
                       << "\n\nnot json\n[]\n";
  const WorkerEventsRead read = readWorkerEvents(path_);
  EXPECT_EQ(read.events.size(), 1u);
  EXPECT_EQ(read.bad_lines, 2);
  EXPECT_EQ(whatWasLeftOut(read).rfind("2 line(s) are not events (the first, line 3: not valid "
                                       "JSON; each line must be",
                                       0),
            0u)
      << whatWasLeftOut(read);
  fs::remove(path_);
  fs::create_symlink("/dev/zero", path_);
  EXPECT_EQ(whatWasLeftOut(readWorkerEvents(path_)), "not read: a symbolic link");
}

// A node's events as the writer lays them out, by hand.
class TimelineMergeTest : public ::testing::Test {
 protected:
  static json event(const std::string& name, char ph, double ts, int tid, json args = nullptr) {
    json made = {
        {"name", name}, {"ph", std::string(1, ph)}, {"ts", ts}, {"pid", 4242}, {"tid", tid}};
    if (ph == 'i') {
      made["s"] = "t";
    }
    if (!args.is_null()) {
      made["args"] = std::move(args);
    }
    return made;
  }
  static json start(double ts, double wall) {
    return event(std::string(timeline::kAgentStart), 'i', ts, timeline::kAgentTrack,
                 {{"host", "h"}, {"wall_clock_unix_us", wall}});
  }
  static json clock(double ts, double offset, const std::string& reference = "c10d at x:1") {
    return event(
        std::string(timeline::kClockOffset), 'i', ts, timeline::kAgentTrack,
        {{"clock_offset_us", offset}, {"clock_uncertainty_us", 30.0}, {"clock", reference}});
  }
  static timeline::NodeTrace node(std::string file, std::vector<json> events, bool closed = true) {
    return {std::move(file), {std::move(events), closed}};
  }
  // The merged ts of the event named `name` of process `pid`.
  static double tsOf(const timeline::MergedTrace& merged, int pid, const std::string& name) {
    for (const json& event : merged.events) {
      if (event["pid"] == pid && event["name"] == name) {
        return event["ts"].get<double>();
      }
    }
    ADD_FAILURE() << "no " << name << " on pid " << pid;
    return -1;
  }
};

TEST_F(TimelineMergeTest, EachNodeIsShiftedByItsOwnOffsetOntoTheRendezvousClock) {
  const auto merged = timeline::mergeTraces({
      node("a", {start(1000, 5e15), clock(1100, 500), event("work", 'i', 2000, 1)}),
      node("b", {start(90000, 7e15), clock(90100, -85000), event("work", 'i', 91000, 1)}),
  });
  EXPECT_EQ(tsOf(merged, 1, "work"), 2500);
  EXPECT_EQ(tsOf(merged, 2, "work"), 6000);
  EXPECT_EQ(tsOf(merged, 1, std::string(timeline::kAgentStart)), 1500)
      << "events before the measurement take the first offset";
  const std::string text = timeline::formatTrace(merged.events);
  const auto check = test_support::checkTrace(text);
  EXPECT_TRUE(check.problems.empty()) << joined(check.problems) << text;
  EXPECT_NE(joined(merged.notes).find("rendezvous' clock"), std::string::npos)
      << joined(merged.notes);
}

TEST_F(TimelineMergeTest, ALaterMeasurementHoldsFromItsTimeOn) {
  const auto merged =
      timeline::mergeTraces({node("a", {start(0, 0), clock(10, 100), event("before", 'i', 50, 1),
                                        clock(60, 300), event("after", 'i', 70, 1)})});
  EXPECT_EQ(tsOf(merged, 1, "before"), 150);
  EXPECT_EQ(tsOf(merged, 1, "after"), 370);
}

TEST_F(TimelineMergeTest, WithoutAnOffsetEveryNodeGoesByItsWallClockAndANoteSaysWhy) {
  const auto merged = timeline::mergeTraces({
      node("a", {start(1000, 5000000), clock(1100, 500), event("work", 'i', 2000, 1)}),
      node("b", {start(300, 6000000), event("work", 'i', 400, 1)}),
  });
  EXPECT_EQ(tsOf(merged, 1, "work"), 5001000);
  EXPECT_EQ(tsOf(merged, 2, "work"), 6000100);
  EXPECT_NE(joined(merged.notes).find("b has no clock offset"), std::string::npos)
      << joined(merged.notes);
}

TEST_F(TimelineMergeTest, OffsetsToDifferentClocksAreNotMixed) {
  const auto merged = timeline::mergeTraces({
      node("a", {start(0, 1000), clock(1, 50, "one"), event("work", 'i', 10, 1)}),
      node("b", {start(0, 2000), clock(1, 70, "another"), event("work", 'i', 10, 1)}),
  });
  EXPECT_EQ(tsOf(merged, 1, "work"), 1010);
  EXPECT_EQ(tsOf(merged, 2, "work"), 2010);
}

TEST_F(TimelineMergeTest, ACutFileEndsWithAnEventSayingSo) {
  const auto merged = timeline::mergeTraces(
      {node("killed", {start(0, 0), clock(1, 5), event("rank 0", 'B', 20, 10)}, false)});
  EXPECT_EQ(tsOf(merged, 1, "timeline ends: the agent was killed or is still running"), 25);
  EXPECT_NE(joined(merged.notes).find("killed: cut short"), std::string::npos)
      << joined(merged.notes);
}

// A killed agent never folded in what its running workers reported: the
// merge reads it from worker_events/ next to the file, for the workers whose
// slice is still open (not for one that exited: the agent folded its file).
TEST_F(TimelineMergeTest, ACutFileGetsWhatItsRunningWorkersReportedAfterItsLastEvent) {
  test_support::TempDir dir("ddprun-timeline-merge-test");
  const fs::path events_dir = dir / std::string(timeline::kWorkerEventsDir);
  fs::create_directories(events_dir);
  std::ofstream(timelineEventsFile(events_dir, 2, 0))
      << R"({"name": "snapshot", "ts_monotonic_ns": 90000, "dur_ns": 4000, "epoch": 6})"
      << "\n";
  std::ofstream(timelineEventsFile(events_dir, 2, 1))
      << R"({"name": "folded already", "ts_monotonic_ns": 50000})"
      << "\n";
  const std::vector<json> events = {start(0, 0), clock(1, 5),
                                    event("rank 4", 'B', 20, timeline::workerTrack(0),
                                          {{"rank", 4}, {"local_rank", 0}, {"round", 2}}),
                                    event("rank 5", 'B', 21, timeline::workerTrack(1),
                                          {{"rank", 5}, {"local_rank", 1}, {"round", 2}}),
                                    event("rank 5", 'E', 30, timeline::workerTrack(1))};
  timeline::NodeTrace killed = node((dir / "timeline.json").string(), events, false);
  timeline::addUnfoldedWorkerEvents(killed);
  EXPECT_EQ(killed.reported_late, 1);
  const auto merged = timeline::mergeTraces({killed});
  EXPECT_EQ(tsOf(merged, 1, "snapshot"), 95);
  EXPECT_EQ(tsOf(merged, 1, "timeline ends: the agent was killed or is still running"), 95);
  for (const json& event : merged.events) {
    EXPECT_NE(event["name"], "folded already");
    if (event["name"] == "snapshot") {
      EXPECT_EQ(event["tid"], timeline::reportedTrack(0));
      EXPECT_EQ(event["args"]["rank"], 4);
      EXPECT_EQ(event["args"]["round"], 2);
    }
  }
  EXPECT_NE(joined(merged.notes).find("1 event(s) its running workers had reported"),
            std::string::npos)
      << joined(merged.notes);

  EXPECT_TRUE(killed.left_out.empty()) << joined(killed.left_out);

  // A worker's file the merge will not read (a link, here) is named in a note.
  fs::remove(timelineEventsFile(events_dir, 2, 0));
  fs::create_symlink("/dev/zero", timelineEventsFile(events_dir, 2, 0));
  timeline::NodeTrace linked = node((dir / "timeline.json").string(), events, false);
  timeline::addUnfoldedWorkerEvents(linked);
  EXPECT_EQ(linked.reported_late, 0);
  EXPECT_NE(
      joined(timeline::mergeTraces({linked}).notes)
          .find(timelineEventsFile(events_dir, 2, 0).string() + ": not read: a symbolic link"),
      std::string::npos);

  timeline::NodeTrace whole = node((dir / "timeline.json").string(), events, true);
  timeline::addUnfoldedWorkerEvents(whole);
  EXPECT_EQ(whole.reported_late, 0) << "a closed file's workers were all folded in by its agent";
}

// A worker reports its own events on its own track (reportedTrack): one it
// names like the agent's clock or start must not move its node's events.
TEST_F(TimelineMergeTest, AWorkersEventsNamedLikeTheAgentsDoNotMoveItsClock) {
  const int reported = timeline::reportedTrack(0);
  json forged_start = event(std::string(timeline::kAgentStart), 'i', 0, reported,
                            {{"host", "forged"}, {"wall_clock_unix_us", 1}});
  json forged_clock =
      event(std::string(timeline::kClockOffset), 'i', 5, reported,
            {{"clock_offset_us", 3.6e9}, {"clock_uncertainty_us", 1.0}, {"clock", "c10d at x:1"}});
  const auto merged = timeline::mergeTraces({node(
      "a", {forged_start, start(1, 0), clock(2, 5), forged_clock, event("work", 'i', 20, 1)})});
  EXPECT_EQ(tsOf(merged, 1, "work"), 25);
  EXPECT_EQ(merged.events.front()["args"]["name"], "h (never in a round)");
}

TEST_F(TimelineMergeTest, FilesOfDifferentRunsAreRefusedNamingEachUnlessAskedFor) {
  auto of_run = [](const std::string& run_id, double wall) {
    json made = start(0, wall);
    made["args"]["run_id"] = run_id;
    return made;
  };
  const std::vector<timeline::NodeTrace> nodes = {
      node("a.json", {of_run("r1", 1000), clock(1, 50), event("work", 'i', 10, 1)}),
      node("b.json", {of_run("r2", 2000), clock(1, 70), event("work", 'i', 10, 1)}),
  };
  try {
    timeline::mergeTraces(nodes);
    FAIL() << "merged";
  } catch (const timeline::MixedRunsError& error) {
    EXPECT_NE(std::string(error.what()).find("a.json (run r1), b.json (run r2)"), std::string::npos)
        << error.what();
  }
  const auto merged = timeline::mergeTraces(nodes, timeline::MixedRuns::kMergeOnWallClocks);
  EXPECT_EQ(tsOf(merged, 1, "work"), 1010) << "on the wall clocks, not the offsets";
  EXPECT_EQ(tsOf(merged, 2, "work"), 2010);
  EXPECT_NE(joined(merged.notes).find("different runs"), std::string::npos) << joined(merged.notes);
  // One run's files merge as before.
  EXPECT_NO_THROW(timeline::mergeTraces({node("a.json", {of_run("r1", 1000), clock(1, 50)}),
                                         node("b.json", {of_run("r1", 2000), clock(1, 70)})}));
}

TEST_F(TimelineMergeTest, AFileWithoutAnAgentStartIsRefusedNamingIt) {
  try {
    timeline::mergeTraces({node("x.json", {event("work", 'i', 1, 1)})});
    FAIL() << "merged";
  } catch (const timeline::TraceError& error) {
    EXPECT_NE(std::string(error.what()).find("x.json: no \"agent start\" event"), std::string::npos)
        << error.what();
  }
}

}  // namespace
}  // namespace ddprun::launcher

// The timeline with the real ddprun binary and fake workers: where it is
// written (and said), `ddprun timeline`'s answers to bad input, and two
// agents on loopback under a ddprund whose files merge onto the daemon's
// clock, with offsets near 0 (one host, one clock); when one of them is
// SIGKILLed, its file is cut short and the merge shows the survivor's
// recovery.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>

#include "ddprun/test_support/command.hpp"
#include "ddprun/test_support/daemon_process.hpp"
#include "ddprun/test_support/eventually.hpp"
#include "ddprun/test_support/files.hpp"
#include "ddprun/test_support/trace_check.hpp"
#include "elastic_fixture.hpp"

namespace ddprun::launcher {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using test_support::readFile;
using testing::ElasticTest;
namespace fs = std::filesystem;

std::string problems(const test_support::TraceCheck& check) {
  std::string text;
  for (const std::string& problem : check.problems) {
    text += problem + "\n";
  }
  return text;
}

using test_support::traceEvents;

std::vector<json> events(const std::string& text) { return traceEvents(text); }

std::vector<json> named(const std::vector<json>& all, const std::string& name, int pid = -1) {
  return test_support::eventsNamed(all, name, pid);
}

class DdprunTimelineTest : public ElasticTest {
 protected:
  test_support::CommandResult ddprun(std::vector<std::string> args) {
    args.insert(args.begin(), DDPRUN_BINARY);
    test_support::CommandOptions options;
    options.env = {{"PATH", "/usr/bin:/bin"}, {"TMPDIR", dir_.path().string()}};
    options.timeout = 60s;
    return test_support::runCommand(args, options);
  }

  // The path the agent's start-up line names.
  static fs::path timelineNamedIn(const std::string& log) {
    std::smatch match;
    const std::regex said("timeline in (\\S+timeline\\.json)");
    return std::regex_search(log, match, said) ? fs::path(match[1].str()) : fs::path();
  }
};

TEST_F(DdprunTimelineTest, ACrashAndResumeRunSaysWhereItsTimelineIsAndItMergesAlone) {
  const fs::path logs = dir_ / "logs";
  const auto run = ddprun({"--standalone", "--nproc-per-node", "2", "--max-restarts", "1",
                           "--log-dir", logs.string(), "--no-python", DDPRUN_FAKE_WORKER,
                           "--only-rank", "0", "--only-attempt", "0", "--exit", "3"});
  ASSERT_EQ(run.code, 0) << run.errors;
  const fs::path timeline = timelineNamedIn(run.errors);
  ASSERT_FALSE(timeline.empty()) << run.errors;
  EXPECT_EQ(timeline.parent_path().parent_path(), logs) << "in the run's log directory";
  const std::string text = readFile(timeline);
  const auto check = test_support::checkTrace(text);
  EXPECT_TRUE(check.problems.empty()) << problems(check) << text;
  EXPECT_TRUE(check.closed);
  const auto own = events(text);
  ASSERT_EQ(named(own, "restart").size(), 1u) << text;
  ASSERT_EQ(named(own, "ddprun exit").size(), 1u) << text;
  EXPECT_EQ(named(own, "ddprun exit")[0]["args"]["exit_code"], 0);
  const auto clock = named(own, "clock offset");
  ASSERT_EQ(clock.size(), 1u) << text;
  EXPECT_EQ(clock[0]["args"]["clock_offset_us"], 0.0) << "standalone: the agent's own clock";

  const fs::path merged = dir_ / "merged.json";
  const auto merge = ddprun({"timeline", logs.string(), "-o", merged.string()});
  ASSERT_EQ(merge.code, 0) << merge.errors;
  const std::string merged_text = readFile(merged);
  const auto merged_check = test_support::checkTrace(merged_text);
  EXPECT_TRUE(merged_check.problems.empty()) << problems(merged_check) << merged_text;
  EXPECT_EQ(named(events(merged_text), "process_name").size(), 1u) << merged_text;
}

// --log-dir /dev/null asks for no files at all: no timeline either, and the
// start-up line says so.
TEST_F(DdprunTimelineTest, WithNoLogFilesThereIsNoTimeline) {
  const auto run =
      ddprun({"--standalone", "--log-dir", "/dev/null", "--no-python", DDPRUN_FAKE_WORKER});
  ASSERT_EQ(run.code, 0) << run.errors;
  EXPECT_TRUE(timelineNamedIn(run.errors).empty()) << run.errors;
  EXPECT_NE(run.errors.find("no timeline"), std::string::npos) << run.errors;
  for (const auto& entry : fs::recursive_directory_iterator(dir_.path())) {
    EXPECT_NE(entry.path().filename(), "timeline.json") << entry.path();
  }
}

TEST_F(DdprunTimelineTest, BadInputIsOneLineNamingItAndBadFlagsAreExitTwo) {
  const fs::path missing = dir_ / "missing";
  auto result = ddprun({"timeline", missing.string()});
  EXPECT_EQ(result.code, 1);
  EXPECT_EQ(result.errors,
            "ddprun timeline: " + missing.string() + ": no such file or directory\n");
  EXPECT_TRUE(result.output.empty());

  const fs::path text = dir_ / "notes.txt";
  std::ofstream(text) << "hello\n";
  result = ddprun({"timeline", text.string()});
  EXPECT_EQ(result.code, 1);
  EXPECT_EQ(result.errors, "ddprun timeline: " + text.string() +
                               ": not a trace: it does not start with '[' or '{'\n");

  const fs::path other_trace = dir_ / "other.json";
  std::ofstream(other_trace) << R"([{"name":"x","ph":"i","s":"t","ts":1,"pid":1,"tid":1}])";
  result = ddprun({"timeline", other_trace.string()});
  EXPECT_EQ(result.code, 1);
  EXPECT_NE(result.errors.find(other_trace.string() + ": no \"agent start\" event"),
            std::string::npos)
      << result.errors;

  const fs::path empty_dir = dir_ / "empty";
  fs::create_directories(empty_dir);
  result = ddprun({"timeline", empty_dir.string()});
  EXPECT_EQ(result.code, 1);
  EXPECT_NE(result.errors.find(empty_dir.string() + ": no timeline.json in it"), std::string::npos)
      << result.errors;

  result = ddprun({"timeline", "--frobnicate", empty_dir.string()});
  EXPECT_EQ(result.code, 2);
  EXPECT_NE(result.errors.find("--frobnicate"), std::string::npos) << result.errors;
  EXPECT_NE(result.errors.find("usage: ddprun timeline"), std::string::npos) << result.errors;
  // "--output=" is "" as in argparse, never the DIR after it; "" names no file.
  for (const std::string& empty : std::vector<std::string>{"--output=", "-o="}) {
    result = ddprun({"timeline", empty, empty_dir.string()});
    EXPECT_EQ(result.code, 2) << empty;
    EXPECT_EQ(result.errors.rfind("ddprun timeline: " + empty.substr(0, empty.size() - 1) +
                                      ": empty value (an unset variable?)",
                                  0),
              0u)
        << result.errors;
    EXPECT_NE(result.errors.find("usage: ddprun timeline"), std::string::npos) << result.errors;
  }
  result = ddprun({"timeline"});
  EXPECT_EQ(result.code, 2);
  EXPECT_NE(result.errors.find("required: DIR"), std::string::npos) << result.errors;
  result = ddprun({"timeline", "--help"});
  EXPECT_EQ(result.code, 0);
  EXPECT_NE(result.output.find("usage: ddprun timeline"), std::string::npos);
}

// Two standalone runs in one --log-dir are two jobs (each its own run id):
// merging them is refused unless asked for.
TEST_F(DdprunTimelineTest, TwoRunsInOneLogDirAreRefusedUnlessMixedRunsIsGiven) {
  const fs::path logs = dir_ / "logs";
  for (int run = 0; run < 2; ++run) {
    const auto result =
        ddprun({"--standalone", "--log-dir", logs.string(), "--no-python", DDPRUN_FAKE_WORKER});
    ASSERT_EQ(result.code, 0) << result.errors;
  }
  auto merge = ddprun({"timeline", logs.string(), "-o", (dir_ / "merged.json").string()});
  EXPECT_EQ(merge.code, 1) << merge.errors;
  EXPECT_EQ(std::count(merge.errors.begin(), merge.errors.end(), '\n'), 1) << merge.errors;
  EXPECT_NE(merge.errors.find("of different runs"), std::string::npos) << merge.errors;
  EXPECT_NE(merge.errors.find("--mixed-runs"), std::string::npos) << merge.errors;
  EXPECT_FALSE(fs::exists(dir_ / "merged.json"));

  merge =
      ddprun({"timeline", "--mixed-runs", logs.string(), "-o", (dir_ / "merged.json").string()});
  EXPECT_EQ(merge.code, 0) << merge.errors;
  EXPECT_NE(merge.errors.find("wall clocks"), std::string::npos) << merge.errors;
  EXPECT_EQ(named(events(readFile(dir_ / "merged.json")), "process_name").size(), 2u);
}

// A merge that cannot be written to its standard output fails saying so.
TEST_F(DdprunTimelineTest, AFullStandardOutputIsAnErrorNamingIt) {
  const fs::path logs = dir_ / "logs";
  const auto run =
      ddprun({"--standalone", "--log-dir", logs.string(), "--no-python", DDPRUN_FAKE_WORKER});
  ASSERT_EQ(run.code, 0) << run.errors;
  const int full = ::open("/dev/full", O_WRONLY | O_CLOEXEC);
  ASSERT_GE(full, 0);
  const fs::path errors_file = dir_ / "errors.txt";
  const int errors_fd = ::open(errors_file.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  ASSERT_GE(errors_fd, 0);
  SpawnOptions options;
  options.argv = {DDPRUN_BINARY, "timeline", logs.string()};
  options.env = {{"PATH", "/usr/bin:/bin"}};
  options.stdout_fd = full;
  options.stderr_fd = errors_fd;
  Subprocess merge(options);
  ::close(full);
  ::close(errors_fd);
  const auto status = merge.waitFor(60s);
  ASSERT_TRUE(status) << "still running";
  EXPECT_EQ(status->kind, ExitStatus::Kind::Exited);
  EXPECT_EQ(status->code, 1);
  const std::string errors = readFile(errors_file);
  EXPECT_NE(errors.find("ddprun timeline: the standard output cannot be written: No space left"),
            std::string::npos)
      << errors;
}

// A run id is the user's bytes, not always UTF-8: the timeline (JSON) gets
// U+FFFD for what is not, the log shows the byte escaped (the path it names
// is the escaped one, so the file is found in the log directory), and the
// run goes on.
TEST_F(DdprunTimelineTest, ARunIdThatIsNotUtf8StillGivesARunAndATrace) {
  const fs::path logs = dir_ / "logs";
  const auto run = ddprun({"--rdzv-backend", "c10d", "--rdzv-endpoint", "localhost:0", "--rdzv-id",
                           "r\xff", "--log-dir", logs.string(), "--no-python", DDPRUN_FAKE_WORKER});
  ASSERT_EQ(run.code, 0) << run.errors;
  EXPECT_NE(timelineNamedIn(run.errors).string().find("r\\xff_"), std::string::npos) << run.errors;
  fs::path timeline;
  for (const auto& entry : fs::directory_iterator(logs)) {
    timeline = entry.path() / "timeline.json";
  }
  ASSERT_TRUE(fs::is_regular_file(timeline)) << run.errors;
  const std::string text = readFile(timeline);
  const auto check = test_support::checkTrace(text);
  EXPECT_TRUE(check.problems.empty()) << problems(check) << text;
  EXPECT_TRUE(check.closed) << text;
  const auto start = named(events(text), "agent start");
  ASSERT_EQ(start.size(), 1u) << text;
  EXPECT_EQ(start[0]["args"]["run_id"], "r\xef\xbf\xbd");
  EXPECT_EQ(ddprun({"timeline", logs.string(), "-o", (dir_ / "m.json").string()}).code, 0);
}

// The workers wait until both agents have measured their clocks: each
// measures after its join on its lease connection, between its other
// requests, and a job over within milliseconds (a loaded machine) may close
// first, leaving the merge only the wall clocks.
TEST_F(DdprunTimelineTest, TwoAgentsMergeOntoTheDaemonsClockWithOffsetsNearZero) {
  test_support::DaemonProcess daemon;
  const fs::path go = dir_ / "go";
  const std::vector<std::string> wait_for_go = {"--after", go.string()};
  Subprocess a =
      agent("a", "2", daemon.port(), wait_for_go, {"--log-dir", (dir_ / "a" / "logs").string()});
  Subprocess b =
      agent("b", "2", daemon.port(), wait_for_go, {"--log-dir", (dir_ / "b" / "logs").string()});
  const auto measured = [&](const std::string& node) {
    const fs::path file = timelineNamedIn(log(node));
    return !file.empty() && !named(events(readFile(file)), "clock offset").empty();
  };
  ASSERT_TRUE(test_support::eventually([&] { return measured("a") && measured("b"); }, 30s))
      << log("a") << log("b");
  std::ofstream(go.string()) << "go\n";
  ASSERT_TRUE(a.wait().success()) << log("a");
  ASSERT_TRUE(b.wait().success()) << log("b");
  std::vector<json> clocks;
  for (const std::string node : {"a", "b"}) {
    const auto own = events(readFile(timelineNamedIn(log(node))));
    const auto clock = named(own, "clock offset");
    ASSERT_EQ(clock.size(), 1u) << log(node);
    const double offset = clock[0]["args"]["clock_offset_us"];
    const double uncertainty = clock[0]["args"]["clock_uncertainty_us"];
    // One host, one clock: the estimate is off by at most half the round
    // trip (plus the rounding to nanoseconds).
    EXPECT_LE(std::abs(offset), uncertainty / 2 + 0.01) << clock[0];
    EXPECT_LT(uncertainty, 50'000) << "a loopback round trip: " << clock[0];
    EXPECT_EQ(clock[0]["args"]["clock"],
              "c10d rendezvous at 127.0.0.1:" + std::to_string(daemon.port()));
    clocks.push_back(clock[0]);
  }
  const fs::path merged = dir_ / "merged.json";
  const auto merge = ddprun({"timeline", "-o", merged.string(), (dir_ / "a" / "logs").string(),
                             (dir_ / "b" / "logs").string()});
  ASSERT_EQ(merge.code, 0) << merge.errors;
  EXPECT_NE(merge.errors.find("on the rendezvous' clock"), std::string::npos) << merge.errors;
  const std::string text = readFile(merged);
  const auto check = test_support::checkTrace(text);
  EXPECT_TRUE(check.problems.empty()) << problems(check) << text;
  EXPECT_EQ(check.open_slices, 0);
  const auto all = events(text);
  const auto processes = named(all, "process_name");
  ASSERT_EQ(processes.size(), 2u) << text;
  EXPECT_NE(processes[0]["args"]["name"], processes[1]["args"]["name"]);
  // Each node's clock event moved by its own offset.
  for (int pid : {1, 2}) {
    const json& own = clocks[static_cast<std::size_t>(pid - 1)];
    const auto moved = named(all, "clock offset", pid);
    ASSERT_EQ(moved.size(), 1u);
    EXPECT_EQ(moved[0]["ts"].get<double>(),
              static_cast<double>(std::llround(own["ts"].get<double>() +
                                               own["args"]["clock_offset_us"].get<double>())));
  }
}

// Node b (guardian and agent at once, as when its machine dies) is
// SIGKILLed while its workers run; a's workers restart in a smaller world.
TEST_F(DdprunTimelineTest, AKilledNodesFileIsCutShortAndTheMergeShowsTheRecovery) {
  test_support::DaemonProcess daemon;
  const std::vector<std::string> hang_first = {"--hang", "--only-attempt", "0"};
  Subprocess a =
      agent("a", "1:2", daemon.port(), hang_first, {"--log-dir", (dir_ / "a" / "logs").string()});
  Subprocess b =
      agent("b", "1:2", daemon.port(), hang_first, {"--log-dir", (dir_ / "b" / "logs").string()});
  // Killed once its timeline has both workers' starts (a worker may be
  // ready a moment before its agent has written that it started).
  const auto both_started = [&] {
    const fs::path file = timelineNamedIn(log("b"));
    if (file.empty()) {
      return false;
    }
    int started = 0;
    for (const json& event : events(readFile(file))) {
      started += event["ph"] == "B" && event["tid"].get<int>() >= 10 ? 1 : 0;
    }
    return started == 2;
  };
  ASSERT_TRUE(test_support::eventually([&] { return ready("a") && both_started(); }, 30s))
      << log("a") << log("b");
  b.signalGroup(SIGKILL);
  b.wait();
  ASSERT_TRUE(a.wait().success()) << log("a");
  const std::string killed = readFile(timelineNamedIn(log("b")));
  const auto killed_check = test_support::checkTrace(killed);
  EXPECT_TRUE(killed_check.problems.empty()) << problems(killed_check) << killed;
  EXPECT_FALSE(killed_check.closed) << killed;
  EXPECT_GE(killed_check.open_slices, 3) << "its round and its two workers never ended: " << killed;

  const fs::path merged = dir_ / "merged.json";
  const auto merge = ddprun({"timeline", "-o", merged.string(), (dir_ / "a" / "logs").string(),
                             (dir_ / "b" / "logs").string()});
  ASSERT_EQ(merge.code, 0) << merge.errors;
  EXPECT_NE(merge.errors.find("cut short"), std::string::npos) << merge.errors;
  const std::string text = readFile(merged);
  const auto check = test_support::checkTrace(text);
  EXPECT_TRUE(check.problems.empty()) << problems(check) << text;
  const auto all = events(text);
  EXPECT_EQ(named(all, "timeline ends: the agent was killed or is still running", 2).size(), 1u)
      << text;
  const auto stops = named(all, "stop workers", 1);
  ASSERT_FALSE(stops.empty()) << text;
  EXPECT_EQ(stops[0]["args"]["reason"], "round over");
  EXPECT_EQ(named(all, "round 1", 1).size(), 2u) << "the survivor's recovery: " << text;
}

}  // namespace
}  // namespace ddprun::launcher

// The timeline against hostile input, with the real ddprun binary: a
// worker's events file nesting 50,000 levels (the agent ends well and its
// timeline.json still loads in Python) or over its MiB (a warning says so),
// and `ddprun timeline` given what is no regular file (/dev/zero, a link to
// it, a FIFO), a file over its cap or nesting too deep: one line each, exit
// 1, never hanging and never growing without bound.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "ddprun/test_support/command.hpp"
#include "ddprun/test_support/files.hpp"
#include "ddprun/test_support/temp_dir.hpp"
#include "ddprun/test_support/trace_check.hpp"

namespace ddprun::launcher {
namespace {

using namespace std::chrono_literals;
using test_support::readFile;
namespace fs = std::filesystem;

// {"name":NAME,...,"a":[[...]]} nesting `depth` arrays under "a".
std::string deepEvent(const std::string& name, int depth) {
  const auto levels = static_cast<std::size_t>(depth);
  return R"({"name":")" + name + R"(","ts_monotonic_ns":5000,"a":)" + std::string(levels, '[') +
         std::string(levels, ']') + "}";
}

class DdprunTimelineInputTest : public ::testing::Test {
 protected:
  // ddprun with `args`, under a deadline: a read that blocks fails the test
  // instead of hanging it. Outside the sanitizers (whose shadow memory an
  // address-space limit refuses) it also runs within 4 GiB of address
  // space, so a read that grows without bound fails fast.
  test_support::CommandResult ddprun(const std::vector<std::string>& args,
                                     std::chrono::seconds deadline = 30s) {
    std::vector<std::string> argv = {"/bin/sh", "-c", kLimited, DDPRUN_BINARY};
    argv.insert(argv.end(), args.begin(), args.end());
    test_support::CommandOptions options;
    options.env = {{"PATH", "/usr/bin:/bin"}, {"TMPDIR", dir_.path().string()}};
    options.timeout = deadline;
    return test_support::runCommand(argv, options);
  }

  // A standalone run of one fake worker that appends `lines` to its events
  // file; its timeline.json.
  fs::path runReporting(const std::string& lines, test_support::CommandResult& run) {
    const fs::path source = dir_ / "lines.jsonl";
    std::ofstream(source, std::ios::binary) << lines;
    run = ddprun({"--standalone", "--log-dir", (dir_ / "logs").string(), "--no-python",
                  DDPRUN_FAKE_WORKER, "--timeline-lines", source.string()});
    std::smatch match;
    const std::regex said("timeline in (\\S+timeline\\.json)");
    return std::regex_search(run.errors, match, said) ? fs::path(match[1].str()) : fs::path();
  }

  // `ddprun timeline FILE`'s one line, for a file it must refuse.
  void expectRefused(const fs::path& input, const std::string& why) {
    const auto result =
        ddprun({"timeline", input.string(), "-o", (dir_ / "out.json").string()}, 10s);
    EXPECT_FALSE(result.timed_out) << input << ": the read blocked";
    EXPECT_EQ(result.code, 1) << input << "\n" << result.errors;
    EXPECT_EQ(result.errors, "ddprun timeline: " + input.string() + ": " + why + "\n");
    EXPECT_FALSE(fs::exists(dir_ / "out.json"));
  }

#if defined(__SANITIZE_ADDRESS__)
  static constexpr const char* kLimited = R"(exec "$0" "$@")";
#else
  static constexpr const char* kLimited = R"(ulimit -v 4194304 && exec "$0" "$@")";
#endif
  test_support::TempDir dir_{"ddprun-timeline-input-test"};
};

// Python's json stops at about 1,000 levels; ddprun's files must load there.
bool pythonLoads(const fs::path& file) {
  test_support::CommandOptions options;
  options.env = {{"PATH", "/usr/bin:/bin"}};
  const auto loaded = test_support::runCommand(
      {"python3", "-c", "import json, sys; json.load(open(sys.argv[1]))", file.string()}, options);
  return loaded.code == 0;
}

TEST_F(DdprunTimelineInputTest, AWorkersEventNesting50000LevelsIsDroppedAndTheRunEndsWell) {
  test_support::CommandResult run;
  const fs::path timeline =
      runReporting(deepEvent("deep", 50'000) + "\n" + deepEvent("shallow", 3) + "\n", run);
  ASSERT_EQ(run.code, 0) << run.errors.substr(0, 2000);
  ASSERT_FALSE(timeline.empty()) << run.errors;
  EXPECT_NE(run.errors.find("1 line(s) are not events (the first, line 1: nested deeper than 62 "
                            "levels"),
            std::string::npos)
      << run.errors;
  const std::string text = readFile(timeline);
  const auto check = test_support::checkTrace(text);
  EXPECT_TRUE(check.problems.empty()) << check.problems.front();
  EXPECT_TRUE(check.closed);
  EXPECT_EQ(test_support::eventsNamed(test_support::traceEvents(text), "shallow").size(), 1u);
  EXPECT_TRUE(test_support::eventsNamed(test_support::traceEvents(text), "deep").empty());
  EXPECT_TRUE(pythonLoads(timeline));
}

// At the bound a worker's event is kept, and the file holding it still
// merges and loads: the bound leaves room for the trace's own two levels.
TEST_F(DdprunTimelineInputTest, AWorkersEventAtTheBoundIsKeptAndItsTimelineMerges) {
  test_support::CommandResult run;
  const fs::path timeline = runReporting(deepEvent("at bound", 61) + "\n", run);
  ASSERT_EQ(run.code, 0) << run.errors;
  EXPECT_EQ(run.errors.find("not events"), std::string::npos) << run.errors;
  EXPECT_EQ(
      test_support::eventsNamed(test_support::traceEvents(readFile(timeline)), "at bound").size(),
      1u);
  const auto merge = ddprun({"timeline", timeline.string(), "-o", (dir_ / "m.json").string()});
  EXPECT_EQ(merge.code, 0) << merge.errors;
  EXPECT_TRUE(pythonLoads(dir_ / "m.json"));
}

TEST_F(DdprunTimelineInputTest, AWorkersEventsPastTheirMebibyteAreDroppedWithAWarning) {
  const std::string line = R"({"name":"step","ts_monotonic_ns":1000})";
  std::string lines;
  while (lines.size() <= (1u << 20) + 4096) {
    lines += line + "\n";
  }
  test_support::CommandResult run;
  const fs::path timeline = runReporting(lines, run);
  ASSERT_EQ(run.code, 0) << run.errors;
  EXPECT_NE(run.errors.find("it is over 1 MiB: only the whole lines of its first MiB are read"),
            std::string::npos)
      << run.errors;
  EXPECT_FALSE(
      test_support::eventsNamed(test_support::traceEvents(readFile(timeline)), "step").empty());
}

TEST_F(DdprunTimelineInputTest, WhatIsNoRegularFileIsRefusedWithoutReadingIt) {
  expectRefused("/dev/zero", "not read: not a regular file");

  const fs::path run_dir = dir_ / "run";
  fs::create_directories(run_dir);
  fs::create_symlink("/dev/zero", run_dir / "timeline.json");
  expectRefused(run_dir / "timeline.json", "not read: not a regular file");
  const auto by_dir = ddprun({"timeline", run_dir.string()}, 10s);
  EXPECT_EQ(by_dir.code, 1) << by_dir.errors;
  EXPECT_NE(by_dir.errors.find("not a regular file"), std::string::npos) << by_dir.errors;

  const fs::path fifo = dir_ / "fifo.json";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  expectRefused(fifo, "not read: not a regular file");
}

TEST_F(DdprunTimelineInputTest, AFileOverTheCapIsRefused) {
  const fs::path big = dir_ / "big.json";
  std::ofstream(big) << "[\n";
  fs::resize_file(big, (std::uintmax_t{256} << 20) + 1);  // sparse: no disk needed
  expectRefused(big, "not read: larger than 256 MiB, the most ddprun timeline reads of one file");
}

TEST_F(DdprunTimelineInputTest, AFileNestingTooDeepIsRefusedInOneLine) {
  const std::string start =
      R"({"name":"agent start","ph":"i","s":"t","ts":1,"pid":7,"tid":1,"args":{}})";
  const fs::path deep = dir_ / "deep.json";
  std::ofstream(deep) << "[\n" << start << "\n," << deepEvent("deep", 50'000) << "\n]\n";
  expectRefused(deep, "not a trace: nested deeper than 64 levels");

  // Cut short (no "]"), the same line is refused too, not taken for the cut.
  std::ofstream(deep) << "[\n" << start << "\n," << deepEvent("deep", 50'000) << "\n";
  expectRefused(deep, "not a trace: nested deeper than 64 levels");
}

// A link a person made to a real timeline is followed.
TEST_F(DdprunTimelineInputTest, ALinkToATimelineIsFollowed) {
  test_support::CommandResult run;
  const fs::path timeline = runReporting("", run);
  ASSERT_EQ(run.code, 0) << run.errors;
  fs::create_symlink(timeline, dir_ / "link.json");
  const auto merge =
      ddprun({"timeline", (dir_ / "link.json").string(), "-o", (dir_ / "m.json").string()});
  EXPECT_EQ(merge.code, 0) << merge.errors;
}

}  // namespace
}  // namespace ddprun::launcher

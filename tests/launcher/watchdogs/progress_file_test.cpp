// A worker's progress file as the agent reads it: only progress lines count,
// lines arrive in pieces, hostile lines (deep, long, not JSON) are skipped,
// and a file that grows faster than it is read costs a bounded read.
#include "ddprun/launcher/watchdogs/progress_file.hpp"

#include <gtest/gtest.h>

#include <fstream>

#include "ddprun/test_support/temp_dir.hpp"

namespace ddprun::launcher {
namespace {

TEST(ProgressLineTest, OnlyAProgressEventWithAStepIsProgress) {
  const auto line = parseProgressLine(R"({"name": "progress", "ts_monotonic_ns": 7, "step": 42})");
  ASSERT_TRUE(line);
  EXPECT_EQ(line->step, 42);
  EXPECT_EQ(line->ts_ns, 7);
  EXPECT_EQ(parseProgressLine(R"({"name": "progress", "step": 3})")->ts_ns, -1);
  EXPECT_FALSE(parseProgressLine(R"({"name": "progress_bar", "step": 3})"));
  EXPECT_FALSE(parseProgressLine(R"({"name": "progress", "step": -1})"));
  EXPECT_FALSE(parseProgressLine(R"({"name": "progress", "step": "3"})"));
  EXPECT_FALSE(parseProgressLine(R"({"name": "progress"})"));
  EXPECT_FALSE(parseProgressLine(R"(["progress", 3])"));
  EXPECT_FALSE(parseProgressLine("progress"));
  const std::string deep =
      "{\"name\": \"progress\", \"step\": 1, \"x\": " + std::string(100000, '[') +
      std::string(100000, ']') + "}";
  EXPECT_FALSE(parseProgressLine(deep));
}

// A snapshot line says after which step a snapshot was saved: kept apart
// from the steps, which it neither counts as nor times.
TEST(ProgressLinesTest, ASnapshotLineIsNoStepButItsStepIsKept) {
  const auto line = parseProgressLine(R"({"name": "snapshot", "step": 40})");
  ASSERT_TRUE(line);
  EXPECT_TRUE(line->snapshot);
  EXPECT_FALSE(parseProgressLine(R"({"name": "progress", "step": 3})")->snapshot);
  ProgressLines lines;
  const auto seen = lines.consume(
      "{\"name\": \"snapshot\", \"step\": 40}\n{\"name\": \"snapshot\", \"step\": 20}\n");
  EXPECT_EQ(seen.lines, 0);
  EXPECT_FALSE(seen.step);
  EXPECT_EQ(seen.snapshot_step, 40);
  const auto both = lines.consume(
      "{\"name\": \"progress\", \"step\": 41}\n{\"name\": \"snapshot\", \"step\": 41}\n");
  EXPECT_EQ(both.lines, 1);
  EXPECT_EQ(both.step, 41);
  EXPECT_EQ(both.snapshot_step, 41);
}

TEST(ProgressLinesTest, ALineSplitAcrossReadsIsReadWhole) {
  ProgressLines lines;
  EXPECT_EQ(lines.consume(R"({"name": "progress", "st)").lines, 0);
  const auto seen = lines.consume("ep\": 5}\n{\"name\": \"progress\", \"step\": 6}\n{\"na");
  EXPECT_EQ(seen.lines, 2);
  EXPECT_EQ(seen.step, 6);
}

TEST(ProgressLinesTest, GapsComeFromTheWorkersOwnTimestamps) {
  ProgressLines lines;
  const auto seen = lines.consume(
      "{\"name\": \"progress\", \"ts_monotonic_ns\": 1000, \"step\": 1}\n"
      "{\"name\": \"progress\", \"ts_monotonic_ns\": 4000, \"step\": 2}\n"
      "{\"name\": \"progress\", \"ts_monotonic_ns\": 5000, \"step\": 3}\n");
  EXPECT_EQ(seen.first_ts_ns, 1000);
  EXPECT_EQ(seen.last_ts_ns, 5000);
  EXPECT_EQ(seen.longest_gap_ns, 3000);
}

TEST(ProgressLinesTest, ALineTooLongIsSkippedAndTheNextIsRead) {
  ProgressLines lines;
  const std::string long_line = "{\"name\": \"progress\", \"step\": 1, \"pad\": \"" +
                                std::string(ProgressLines::kMaxLineBytes, 'x') + "\"}\n";
  EXPECT_EQ(lines.consume(long_line).lines, 0);
  const auto seen = lines.consume("{\"name\": \"progress\", \"step\": 2}\n");
  EXPECT_EQ(seen.lines, 1);
  EXPECT_EQ(seen.step, 2);
}

TEST(ProgressFileTest, ReadsOnlyWhatWasAppendedSinceTheLastRead) {
  test_support::TempDir dir("ddprun-progress-file");
  const auto path = dir / "progress.jsonl";
  ProgressFile file(path);
  EXPECT_EQ(file.readNew().lines, 0) << "no file yet: nothing reported";
  std::ofstream(path, std::ios::app) << "{\"name\": \"progress\", \"step\": 1}\n";
  EXPECT_EQ(file.readNew().lines, 1);
  EXPECT_EQ(file.readNew().lines, 0);
  std::ofstream(path, std::ios::app) << "{\"name\": \"progress\", \"step\": 2}\n"
                                     << "{\"name\": \"progress\", \"step\": 3}\n";
  const auto seen = file.readNew();
  EXPECT_EQ(seen.lines, 2);
  EXPECT_EQ(seen.step, 3);
}

TEST(ProgressFileTest, AFileThatGrewPastTheBoundIsReadFromItsTail) {
  test_support::TempDir dir("ddprun-progress-file");
  const auto path = dir / "progress.jsonl";
  {
    std::ofstream out(path);
    for (int step = 1; step <= 100000; ++step) {
      out << "{\"name\": \"progress\", \"step\": " << step << "}\n";
    }
  }
  ProgressFile file(path);
  const auto seen = file.readNew();
  EXPECT_EQ(seen.step, 100000);
  // At most the last 64 KiB: about 2,000 of the 100,000 lines.
  EXPECT_LT(seen.lines, 3000);
  EXPECT_GT(seen.lines, 1000);
}

TEST(ProgressFileTest, AFifoOrALinkIsNotRead) {
  test_support::TempDir dir("ddprun-progress-file");
  const auto fifo = dir / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_EQ(ProgressFile(fifo).readNew().lines, 0) << "and it did not block";
  const auto real = dir / "real.jsonl";
  std::ofstream(real) << "{\"name\": \"progress\", \"step\": 1}\n";
  std::filesystem::create_symlink(real, dir / "link");
  EXPECT_EQ(ProgressFile(dir / "link").readNew().lines, 0);
}

TEST(ProgressFileTest, AFileStartedAgainIsReadFromItsStart) {
  test_support::TempDir dir("ddprun-progress-file");
  const auto path = dir / "progress.jsonl";
  std::ofstream(path) << "{\"name\": \"progress\", \"step\": 10}\n"
                      << "{\"name\": \"progress\", \"step\": 11}\n";
  ProgressFile file(path);
  EXPECT_EQ(file.readNew().step, 11);
  std::ofstream(path) << "{\"name\": \"progress\", \"step\": 1}\n";
  EXPECT_EQ(file.readNew().step, 1);
}

}  // namespace
}  // namespace ddprun::launcher

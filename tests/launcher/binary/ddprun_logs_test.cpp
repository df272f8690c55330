// The ddprun executable's log files (docs/torchrun-contract.md §9): every run
// its own <run id>_<random> directory, so a second run with the same run id
// and --log-dir neither appends to the first run's logs nor reports its
// traceback, and --log-dir /dev/null writes no file at all.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "ddprun/launcher/process/subprocess.hpp"
#include "ddprun/test_support/files.hpp"
#include "ddprun_binary_fixture.hpp"

namespace ddprun::launcher {
namespace {

namespace fs = std::filesystem;
using test_support::readFile;
using testing::contains;
using testing::countOf;
using testing::DdprunBinaryTest;
using testing::Outcome;

class DdprunLogsTest : public DdprunBinaryTest {
 protected:
  // A single-node static job: its run id is always "none", as with torchrun.
  std::vector<std::string> staticJob(std::vector<std::string> flags,
                                     std::vector<std::string> worker_args) {
    std::vector<std::string> args = {
        "--rdzv-backend",   "static",
        "--master-addr",    "127.0.0.1",
        "--master-port",    std::to_string(test_support::freeLoopbackPort()),
        "--nproc-per-node", "1"};
    args.insert(args.end(), flags.begin(), flags.end());
    args.insert(args.end(), {"--no-python", DDPRUN_FAKE_WORKER});
    args.insert(args.end(), worker_args.begin(), worker_args.end());
    return args;
  }

  // The run directories under `log_dir`, sorted.
  static std::vector<fs::path> runDirs(const fs::path& log_dir) {
    std::vector<fs::path> dirs;
    for (const auto& entry : fs::directory_iterator(log_dir)) {
      dirs.push_back(entry.path());
    }
    std::sort(dirs.begin(), dirs.end());
    return dirs;
  }

  // Every file under `dir`, recursively.
  static std::vector<fs::path> filesUnder(const fs::path& dir) {
    std::vector<fs::path> files;
    for (const auto& entry : fs::recursive_directory_iterator(dir)) {
      files.push_back(entry.path());
    }
    return files;
  }
};

// The first run's worker records a traceback and fails; the second run's
// worker, same run id and --log-dir, segfaults without writing one. Its
// report must not borrow the first run's traceback.
TEST_F(DdprunLogsTest, AnEarlierRunsErrorFileIsNeverReported) {
  const fs::path log_dir = dir_.path() / "logs";
  const Outcome first = run(staticJob({"--log-dir", log_dir.string()},
                                      {"--error-json", "Traceback: the first run", "--exit", "1"}));
  ASSERT_EQ(first.status, (ExitStatus{ExitStatus::Kind::Exited, 1})) << first.stderr_text;
  ASSERT_TRUE(contains(first.stderr_text, "traceback : Traceback: the first run"))
      << first.stderr_text;

  const Outcome second = run(staticJob({"--log-dir", log_dir.string()}, {"--signal", "11"}));
  EXPECT_EQ(second.status, (ExitStatus{ExitStatus::Kind::Exited, 128 + SIGSEGV}))
      << second.stderr_text;
  EXPECT_TRUE(contains(second.stderr_text, "killed by SIGSEGV")) << second.stderr_text;
  EXPECT_FALSE(contains(second.stderr_text, "the first run")) << second.stderr_text;
  EXPECT_TRUE(contains(second.stderr_text, "error_file: <N/A>")) << second.stderr_text;
}

// torchrun's layout: <log-dir>/<run id>_<random>/attempt_N/<local_rank>/, a
// new run directory per run, named in the agent's first info line.
TEST_F(DdprunLogsTest, EveryRunWritesANewDirectory) {
  const fs::path log_dir = dir_.path() / "logs";
  std::vector<std::string> info_lines;
  for (int run_number = 0; run_number < 2; ++run_number) {
    const Outcome outcome =
        run(staticJob({"--log-dir", log_dir.string(), "-r", "3"}, {"--chatter", "3"}));
    ASSERT_TRUE(outcome.status.success()) << outcome.stderr_text;
    info_lines.push_back(outcome.stderr_text);
  }
  const std::vector<fs::path> runs = runDirs(log_dir);
  ASSERT_EQ(runs.size(), 2u);
  for (const fs::path& run_dir : runs) {
    const std::string name = run_dir.filename().string();
    EXPECT_EQ(name.rfind("none_", 0), 0u) << name;
    EXPECT_EQ(name.size(), std::string("none_").size() + 6) << name;
    EXPECT_EQ(countOf(readFile(run_dir / "attempt_0" / "0" / "stdout.log"), " end\n"), 3)
        << "a run appended to another's file: " << run_dir;
  }
  // Each run names its own directory.
  EXPECT_NE(contains(info_lines[0], "logs in " + runs[0].string()),
            contains(info_lines[0], "logs in " + runs[1].string()))
      << info_lines[0];
  EXPECT_NE(contains(info_lines[1], "logs in " + runs[0].string()),
            contains(info_lines[1], "logs in " + runs[1].string()))
      << info_lines[1];
}

// Without --log-dir, the run directory is <run id>_<random> in a fresh
// ddprun_* directory under $TMPDIR.
TEST_F(DdprunLogsTest, WithoutLogDirTheRunDirectoryIsUnderAFreshTemporaryOne) {
  const fs::path tmp = dir_.path() / "tmp";
  fs::create_directories(tmp);
  extra_env_ = {{"TMPDIR", tmp.string()}};
  const Outcome outcome = run(staticJob({"-r", "1"}, {"--chatter", "2"}));
  ASSERT_TRUE(outcome.status.success()) << outcome.stderr_text;
  const std::vector<fs::path> bases = runDirs(tmp);
  ASSERT_EQ(bases.size(), 1u);
  EXPECT_EQ(bases[0].filename().string().rfind("ddprun_", 0), 0u) << bases[0];
  const std::vector<fs::path> runs = runDirs(bases[0]);
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].filename().string().rfind("none_", 0), 0u) << runs[0];
  EXPECT_EQ(countOf(readFile(runs[0] / "attempt_0" / "0" / "stdout.log"), " end\n"), 2);
  EXPECT_TRUE(contains(outcome.stderr_text, "logs in " + runs[0].string())) << outcome.stderr_text;
}

// A relative --log-dir is made absolute: a worker that changes directory
// (Hydra does) still writes its error file where the report looks.
TEST_F(DdprunLogsTest, ARelativeLogDirGivesWorkersAnAbsoluteErrorFile) {
  const fs::path env_dir = dir_.path() / "env";
  fs::create_directories(env_dir);
  const fs::path relative = fs::relative(dir_.path() / "logs");
  ASSERT_TRUE(relative.is_relative()) << relative;
  auto args = fakeWorkers(1, {"--env-to", env_dir.string()});
  args.insert(args.begin(), {"--log-dir", relative.string()});
  const Outcome outcome = run(args);
  ASSERT_TRUE(outcome.status.success()) << outcome.stderr_text;
  const auto env = test_support::readEnvFile(env_dir / "0.env");
  ASSERT_TRUE(env.contains("TORCHELASTIC_ERROR_FILE"));
  const fs::path error_file = env.at("TORCHELASTIC_ERROR_FILE");
  EXPECT_TRUE(error_file.is_absolute()) << error_file;
  EXPECT_EQ(error_file.string().rfind((dir_.path() / "logs").string(), 0), 0u) << error_file;
}

// --log-dir /dev/null: no file anywhere, a redirected stream dropped, a
// tee'd one on the console only, TORCHELASTIC_ERROR_FILE empty for the
// workers (as torchrun sets it), and no filesystem error.
TEST_F(DdprunLogsTest, DevNullLogDirWritesNoFiles) {
  const fs::path tmp = dir_.path() / "tmp";
  const fs::path env_dir = dir_.path() / "env";
  fs::create_directories(tmp);
  fs::create_directories(env_dir);
  extra_env_ = {{"TMPDIR", tmp.string()}};
  auto args = fakeWorkers(2, {"--env-to", env_dir.string(), "--chatter", "2"});
  args.insert(args.begin(),
              {"--log-dir", "/dev/null", "-r", "1", "-t", "2", "--duplicate-stdout-filters", "says",
               "--duplicate-stderr-filters", "says"});
  const Outcome outcome = run(args);
  ASSERT_TRUE(outcome.status.success()) << outcome.stderr_text;
  // Not even the duplicate filters' files, which once landed in the working directory.
  for (const char* filtered : {"filtered_stdout.log", "filtered_stderr.log"}) {
    EXPECT_FALSE(fs::exists(fs::current_path() / filtered)) << filtered;
    fs::remove(fs::current_path() / filtered);
  }
  EXPECT_EQ(outcome.stdout_text, "") << "a redirected stream reached the console";
  EXPECT_EQ(countOf(outcome.stderr_text, "[default0]:rank 0 says stderr\n"), 1)
      << outcome.stderr_text;
  EXPECT_EQ(countOf(outcome.stderr_text, "[default1]:rank 1 says stderr\n"), 1)
      << outcome.stderr_text;
  EXPECT_TRUE(contains(outcome.stderr_text, "no log files (--log-dir /dev/null)"))
      << outcome.stderr_text;
  EXPECT_TRUE(filesUnder(tmp).empty()) << filesUnder(tmp).front();
  for (const char* local_rank : {"0", "1"}) {
    const auto env = test_support::readEnvFile(env_dir / (std::string(local_rank) + ".env"));
    ASSERT_TRUE(env.contains("TORCHELASTIC_ERROR_FILE")) << local_rank;
    EXPECT_EQ(env.at("TORCHELASTIC_ERROR_FILE"), "") << local_rank;
  }
}

// A failure with --log-dir /dev/null: the report, without a traceback, and
// nothing copied up; the worker's @record had nowhere to write.
TEST_F(DdprunLogsTest, DevNullLogDirFailureIsReportedWithoutTraceback) {
  const fs::path own_error_file = dir_.path() / "agent-error.json";
  extra_env_ = {{"TORCHELASTIC_ERROR_FILE", own_error_file.string()}};
  auto args = fakeWorkers(2, {"--only-rank", "1", "--error-json", "Traceback: x", "--exit", "3"});
  args.insert(args.begin(), {"--log-dir", "/dev/null", "-r", "3"});
  const Outcome outcome = run(args);
  EXPECT_EQ(outcome.status, (ExitStatus{ExitStatus::Kind::Exited, 3})) << outcome.stderr_text;
  EXPECT_TRUE(contains(outcome.stderr_text, "rank      : 1 (local_rank: 1)"))
      << outcome.stderr_text;
  EXPECT_TRUE(contains(outcome.stderr_text, "error_file: <N/A>")) << outcome.stderr_text;
  EXPECT_FALSE(contains(outcome.stderr_text, "Traceback: x")) << outcome.stderr_text;
  EXPECT_FALSE(contains(outcome.stderr_text, "filesystem")) << outcome.stderr_text;
  EXPECT_FALSE(fs::exists(own_error_file));
}

// A --log-dir is logged as the one rule for text from outside shows it:
// escape sequences in a path do not reach the terminal.
TEST_F(DdprunLogsTest, ALogDirHoldingEscapesIsLoggedEscaped) {
  const fs::path log_dir = dir_.path() / "logs\x1b[2J\x07\xe2\x80\xae";
  const Outcome outcome = run(staticJob({"--log-dir", log_dir.string()}, {}));
  ASSERT_EQ(outcome.status, (ExitStatus{ExitStatus::Kind::Exited, 0})) << outcome.stderr_text;
  const std::vector<fs::path> dirs = runDirs(log_dir);
  ASSERT_EQ(dirs.size(), 1u);
  const std::string shown =
      (dir_.path() / "logs\\x1b[2J\\x07\\u202e").string() + "/" + dirs.front().filename().string();
  EXPECT_TRUE(contains(outcome.stderr_text, "logs in " + shown + ", ")) << outcome.stderr_text;
  EXPECT_FALSE(contains(outcome.stderr_text, "\x1b")) << outcome.stderr_text;
  EXPECT_FALSE(contains(outcome.stderr_text, "\x07")) << outcome.stderr_text;
  EXPECT_FALSE(contains(outcome.stderr_text, "\xe2\x80\xae")) << outcome.stderr_text;
}

}  // namespace
}  // namespace ddprun::launcher

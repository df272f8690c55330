// Configuration found wrong at start, as a job script meets it: one line
// naming what and why, exit 2, before any worker starts (README, "Exit
// status"). An empty value as argparse reads it ("--rdzv-id=" with the
// variable unset), and the directories and names the run will make: the log
// directory, the run's <run id>_XXXXXX in it, torch's file-timer pipe.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "ddprun_binary_fixture.hpp"

namespace ddprun::launcher {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using testing::DdprunBinaryTest;
using testing::Outcome;
namespace fs = std::filesystem;

std::string firstLine(const std::string& text) { return text.substr(0, text.find('\n')); }

// Refused at start: exit 2, `line` first on stderr, no worker ran.
void expectRefused(const Outcome& outcome, const fs::path& dir, const std::string& line) {
  EXPECT_EQ(outcome.status.code, 2) << outcome.status.describe() << outcome.stderr_text;
  EXPECT_EQ(firstLine(outcome.stderr_text), "ddprun: " + line) << outcome.stderr_text;
  EXPECT_FALSE(fs::exists(dir / "0.env")) << "no worker starts";
}

std::size_t nameMax(const fs::path& dir) {
  return static_cast<std::size_t>(::pathconf(dir.c_str(), _PC_NAME_MAX));
}

// One node on c10d, hosting its own rendezvous: the run id is the user's
// (--standalone would make one up).
std::vector<std::string> ownRunId(const std::string& run_id, const fs::path& logs,
                                  const fs::path& env_to) {
  return {"--rdzv-backend=c10d", "--rdzv-endpoint=127.0.0.1:0",
          "--rdzv-id=" + run_id, "--log-dir",
          logs.string(),         "--no-python",
          DDPRUN_FAKE_WORKER,    "--env-to",
          env_to.string()};
}

// A job script's unset variable: "--rdzv-id=$UNSET --rdzv-backend=c10d" took the
// second flag as the run id, "--rdzv-id= --log-dir X" ran X.
TEST_F(DdprunBinaryTest, AnEmptyRunIdIsRefusedNotTakenFromTheNextArgument) {
  const std::string refusal =
      "--rdzv-id: empty value (an unset variable?); give ID or leave it out";
  Outcome outcome = run({"--dry-run", "--nnodes=2", "--rdzv-id=", "--rdzv-backend=c10d",
                         "--no-python", DDPRUN_FAKE_WORKER});
  expectRefused(outcome, dir_.path(), refusal);
  EXPECT_EQ(outcome.stdout_text, "");
  outcome =
      runFor({"--rdzv_i=", "--log-dir", DDPRUN_FAKE_WORKER, "--env-to", dir_.path().string()}, 30s);
  expectRefused(outcome, dir_.path(), refusal);
}

// "--log-dir= --no-python echo HI" made a directory named --no-python and
// ran echo under Python: "" is torchrun's "no --log-dir".
TEST_F(DdprunBinaryTest, AnEmptyLogDirIsTheDefaultAndTheNextFlagStaysAFlag) {
  const Outcome outcome = runFor({"--dry-run", "--log-dir=", "--no-python", "echo", "HI"}, 30s);
  ASSERT_TRUE(outcome.status.success()) << outcome.status.describe() << outcome.stderr_text;
  const json plan = json::parse(outcome.stdout_text);
  EXPECT_EQ(plan["log_dir"]["value"], nullptr) << plan.dump();
  EXPECT_EQ(plan["worker_command"]["value"], json({"echo", "HI"})) << plan.dump();
  EXPECT_EQ(plan["python"]["value"], nullptr) << "--no-python was read as a flag";
}

// The run's directory is <run id>_XXXXXX: a run id that leaves no room
// for the suffix passed the 256-byte check and failed making it (exit 1).
TEST_F(DdprunBinaryTest, ARunIdTheLogDirectoryCannotNameIsAConfigurationError) {
  const fs::path logs = dir_.path() / "logs";
  const std::size_t name_max = nameMax(dir_.path());
  ASSERT_LE(name_max, 256u + 7u) << "this file system takes any run id";
  const std::string too_long(name_max - 6, 'a');
  const Outcome refused = runFor(ownRunId(too_long, logs, dir_.path()), 30s);
  expectRefused(refused, dir_.path(),
                "--rdzv-id: " + std::to_string(too_long.size()) +
                    " bytes, too long for the run's log directory <run id>_XXXXXX (names there "
                    "hold " +
                    std::to_string(name_max) + " bytes): at most " + std::to_string(name_max - 7));
  EXPECT_EQ(runFor({"--dry-run", "--nnodes=2", "--rdzv-id=" + too_long, "--log-dir", logs.string(),
                    "--no-python", DDPRUN_FAKE_WORKER},
                   30s)
                .status.code,
            2)
      << "a dry run makes the same check";

  // One byte less fits exactly.
  const std::string longest(name_max - 7, 'a');
  const Outcome ran = runFor(ownRunId(longest, logs, dir_.path()), 60s);
  ASSERT_TRUE(ran.status.success()) << ran.status.describe() << ran.stderr_text;
  EXPECT_EQ(testing::runDir(logs).filename().string().size(), name_max);
}

TEST_F(DdprunBinaryTest, ALogDirThatCannotBeMadeIsAConfigurationError) {
  const fs::path file = dir_.path() / "a-file";
  std::ofstream(file) << "not a directory\n";
  const std::string too_long(nameMax(dir_.path()) + 1, 'x');
  const std::vector<std::pair<fs::path, std::string>> cases = {
      {file, file.string() + ": not a directory"},
      {file / "logs", (file / "logs").string() + ": " + file.string() + " is not a directory"},
      {dir_.path() / too_long / "logs",
       (dir_.path() / too_long / "logs").string() + ": File name too long"},
      {dir_.path() / "new" / too_long, (dir_.path() / "new" / too_long).string() + ": the name '" +
                                           too_long + "' is longer than the " +
                                           std::to_string(nameMax(dir_.path())) +
                                           " bytes a name may have there"},
  };
  for (const auto& [log_dir, why] : cases) {
    SCOPED_TRACE(log_dir.string());
    const Outcome outcome = runFor({"--standalone", "--log-dir", log_dir.string(), "--no-python",
                                    DDPRUN_FAKE_WORKER, "--env-to", dir_.path().string()},
                                   30s);
    expectRefused(outcome, dir_.path(), "--log-dir " + why);
  }
}

TEST_F(DdprunBinaryTest, ALogDirWithoutWritePermissionIsAConfigurationError) {
  const fs::path locked = dir_.path() / "locked";
  fs::create_directory(locked);
  fs::permissions(locked, fs::perms::owner_read | fs::perms::owner_exec);
  if (::access(locked.c_str(), W_OK) == 0) {
    GTEST_SKIP() << "permissions do not bind this user (root)";
  }
  const fs::path logs = locked / "logs";
  const Outcome outcome = runFor({"--standalone", "--log-dir", logs.string(), "--no-python",
                                  DDPRUN_FAKE_WORKER, "--env-to", dir_.path().string()},
                                 30s);
  expectRefused(outcome, dir_.path(),
                "--log-dir " + logs.string() + ": cannot create entries in " + locked.string() +
                    " (Permission denied)");
}

// Without --log-dir the logs go under $TMPDIR.
TEST_F(DdprunBinaryTest, ATemporaryDirectoryThatIsNoneIsAConfigurationError) {
  const fs::path file = dir_.path() / "a-file";
  std::ofstream(file) << "not a directory\n";
  extra_env_ = {{"TMPDIR", file.string()}};
  const Outcome outcome = runFor(
      {"--standalone", "--no-python", DDPRUN_FAKE_WORKER, "--env-to", dir_.path().string()}, 30s);
  expectRefused(outcome, dir_.path(),
                "the temporary directory TMPDIR=" + file.string() +
                    " (the logs' place without --log-dir): Not a directory");
}

// torch's file timer: its server makes the pipe where the variable says.
TEST_F(DdprunBinaryTest, AFileTimerPipeInNoDirectoryIsAConfigurationError) {
  const fs::path pipe = dir_.path() / "missing" / "timer";
  extra_env_ = {{"TORCHELASTIC_ENABLE_FILE_TIMER", "1"},
                {"TORCHELASTIC_TIMER_FILE", pipe.string()}};
  const Outcome outcome =
      runFor({"--standalone", "--log-dir", (dir_.path() / "logs").string(), "--no-python",
              DDPRUN_FAKE_WORKER, "--env-to", dir_.path().string()},
             30s);
  expectRefused(outcome, dir_.path(),
                "the file timer's pipe " + pipe.string() + ": " + pipe.parent_path().string() +
                    ": No such file or directory");
}

}  // namespace
}  // namespace ddprun::launcher

// Configuration found wrong at start, as a job script meets it: one line
// naming what and why, exit 2, before any worker starts (README, "Exit
// status"). An empty value as argparse reads it ("--rdzv-id=" with the
// variable unset).
#include <gtest/gtest.h>

#include <filesystem>
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

}  // namespace
}  // namespace ddprun::launcher

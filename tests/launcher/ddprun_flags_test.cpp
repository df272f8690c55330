// The ddprun executable's flags as a torchrun user types them: abbreviated,
// --help, --print-completion.
#include <gtest/gtest.h>

#include <filesystem>

#include "ddprun_binary_fixture.hpp"

namespace ddprun::launcher {
namespace {

using testing::DdprunBinaryTest;
using testing::Outcome;

TEST_F(DdprunBinaryTest, AbbreviatedFlagsStartTheJob) {
  const Outcome outcome = run({"--stand", "--nproc", "2", "--max_res", "1", "--no-p",
                               DDPRUN_FAKE_WORKER, "--env-to", dir_.path().string()});
  EXPECT_TRUE(outcome.status.success()) << outcome.stderr_text;
  EXPECT_TRUE(std::filesystem::exists(dir_.path() / "1.env")) << "two workers ran";
  EXPECT_NE(test_support::readFile(dir_.path() / "1.env").find("TORCHELASTIC_MAX_RESTARTS=1"),
            std::string::npos);
}

TEST_F(DdprunBinaryTest, AFlagGivenAValueAndAnAmbiguousPrefixAreBadFlags) {
  Outcome outcome = run({"--standalone=1", "--no-python", DDPRUN_FAKE_WORKER});
  EXPECT_EQ(outcome.status.code, 2);
  EXPECT_EQ(outcome.stderr_text.rfind("ddprun: --standalone '1': a flag takes no value\n", 0), 0u)
      << outcome.stderr_text;
  outcome = run({"--rdzv", "c10d", "--no-python", DDPRUN_FAKE_WORKER});
  EXPECT_EQ(outcome.status.code, 2);
  EXPECT_EQ(outcome.stderr_text.rfind("ddprun: ambiguous option: --rdzv could match "
                                      "--rdzv-backend, --rdzv-endpoint, --rdzv-id, --rdzv-conf\n",
                                      0),
            0u)
      << outcome.stderr_text;
}

TEST_F(DdprunBinaryTest, HelpNamesTheProgramAndTheScriptFirst) {
  const Outcome outcome = run({"--help"});
  EXPECT_TRUE(outcome.status.success());
  EXPECT_EQ(outcome.stdout_text.rfind("usage: ddprun [-h] ", 0), 0u) << outcome.stdout_text;
  const std::string usage = outcome.stdout_text.substr(0, outcome.stdout_text.find("\n\n"));
  EXPECT_TRUE(usage.ends_with(" training_script ...")) << usage;
  EXPECT_NE(outcome.stdout_text.find("\npositional arguments:\n  training_script "),
            std::string::npos);
}

TEST_F(DdprunBinaryTest, PrintCompletionPrintsAScriptAndStartsNothing) {
  Outcome outcome = run({"--print-completion", "bash"});
  EXPECT_TRUE(outcome.status.success()) << outcome.stderr_text;
  EXPECT_NE(outcome.stdout_text.find("\ncomplete -o filenames -o bashdefault -F _ddprun ddprun\n"),
            std::string::npos)
      << outcome.stdout_text;
  EXPECT_EQ(outcome.stderr_text, "") << "nothing started, nothing logged";
  outcome = run({"--print_completion=zsh"});
  EXPECT_TRUE(outcome.status.success()) << outcome.stderr_text;
  EXPECT_EQ(outcome.stdout_text.rfind("#compdef ddprun\n", 0), 0u);
  outcome = run({"--print-completion", "fish"});
  EXPECT_EQ(outcome.status.code, 2);
  EXPECT_EQ(
      outcome.stderr_text.rfind("ddprun: --print-completion 'fish': expected bash or zsh\n", 0), 0u)
      << outcome.stderr_text;
}

}  // namespace
}  // namespace ddprun::launcher

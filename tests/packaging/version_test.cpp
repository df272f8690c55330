// --version, which the man pages' help2man reads and an admin asks an
// installed program: each program prints its name and the project's version
// and exits 0. ddprun takes it only spelled in full, so that no abbreviation
// torchrun accepts (`--v` is --virtual-local-rank) changes meaning.
#include "ddprun/version.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ddprun/launcher/config/cli.hpp"
#include "ddprun/proto/errors.hpp"
#include "ddprun/test_support/command.hpp"

namespace ddprun {
namespace {

launcher::LaunchConfig parse(std::vector<std::string> args) {
  return launcher::parseCommandLine(std::move(args), launcher::mapEnvironment({}),
                                    [] { return std::string("run-id"); });
}

std::string parseError(std::vector<std::string> args) {
  try {
    parse(std::move(args));
  } catch (const ConfigError& error) {
    return error.what();
  }
  return "<no error>";
}

test_support::CommandResult run(const std::vector<std::string>& argv) {
  return test_support::runCommand(argv, {launcher::inheritedEnvironment()});
}

TEST(VersionFlag, EachProgramPrintsItsNameAndTheProjectsVersion) {
  const std::string version = kVersion;
  ASSERT_FALSE(version.empty());
  const std::vector<std::pair<std::string, std::string>> programs = {
      {DDPRUN_BINARY, "ddprun " + version + "\n"},
      {DDPRUND_BINARY, "ddprund (ddprun) " + version + "\n"},
#ifdef TRAIN_BINARY
      {TRAIN_BINARY, "train (ddprun) " + version + "\n"},
#endif
  };
  for (const auto& [binary, expected] : programs) {
    const auto result = run({binary, "--version"});
    EXPECT_EQ(result.code, 0) << binary << ": " << result.errors;
    EXPECT_EQ(result.output, expected) << binary;
    EXPECT_EQ(result.errors, "") << binary;
  }
}

TEST(VersionFlag, DdprunTakesItBeforeTheScriptAndNeedsNoScript) {
  EXPECT_TRUE(parse({"--version"}).show_version);
  EXPECT_TRUE(parse({"--nproc", "2", "--version"}).show_version);
  const auto script_arg = parse({"t.py", "--version"});
  EXPECT_FALSE(script_arg.show_version);
  EXPECT_EQ(script_arg.training_script_args, std::vector<std::string>{"--version"});
  EXPECT_EQ(parseError({"--version=1"}), "--version '1': a flag takes no value");
}

TEST(VersionFlag, IsNeverAnAbbreviationSoTorchrunsKeepTheirMeaning) {
  EXPECT_TRUE(parse({"--v", "t.py"}).virtual_local_rank);
  EXPECT_TRUE(parse({"--vi", "t.py"}).virtual_local_rank);
  EXPECT_EQ(parseError({"--vers", "t.py"}), "unrecognized option '--vers'");
  EXPECT_FALSE(parse({"--v", "t.py"}).show_version);
}

}  // namespace
}  // namespace ddprun

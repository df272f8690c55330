// test_support::runCommand with real processes: the environment it is given,
// stdout and stderr apart or merged in the order written, the exit code as a
// shell reports it, and a command past its time SIGKILLed with its whole
// process group (returned, or thrown where asked).
#include "ddprun/test_support/command.hpp"

#include <gtest/gtest.h>
#include <signal.h>

#include <cerrno>
#include <stdexcept>
#include <string>

#include "ddprun/test_support/eventually.hpp"

namespace ddprun::test_support {
namespace {

using namespace std::chrono_literals;

CommandResult runShell(const std::string& script, CommandOptions options = {}) {
  options.env = withDefaultPath(options.env, "/usr/bin:/bin");
  return runCommand({"sh", "-c", script}, options);
}

TEST(CommandTest, TheChildSeesExactlyTheGivenEnvironment) {
  CommandOptions options;
  options.env = {{"PATH", "/usr/bin:/bin"}, {"RANK", "3"}};
  const CommandResult result = runCommand({"env"}, options);
  EXPECT_EQ(result.code, 0);
  EXPECT_EQ(result.output, "PATH=/usr/bin:/bin\nRANK=3\n");
  EXPECT_EQ(result.errors, "");
}

TEST(CommandTest, SeparateStreamsKeepStdoutAndStderrApart) {
  const CommandResult result = runShell("echo out; echo err >&2; echo more; exit 3");
  EXPECT_EQ(result.code, 3);
  EXPECT_FALSE(result.timed_out);
  EXPECT_EQ(result.output, "out\nmore\n");
  EXPECT_EQ(result.errors, "err\n");
}

TEST(CommandTest, MergedStreamsKeepTheOrderWritten) {
  CommandOptions options;
  options.streams = Streams::Merged;
  const CommandResult result = runShell("echo one; echo two >&2; echo three", options);
  EXPECT_EQ(result.code, 0);
  EXPECT_EQ(result.output, "one\ntwo\nthree\n");
  EXPECT_EQ(result.errors, "");
}

TEST(CommandTest, AKilledCommandHas128PlusItsSignal) {
  const CommandResult result = runShell("kill -TERM $$");
  EXPECT_EQ(result.code, 128 + SIGTERM);
  EXPECT_EQ(result.status.describe(), "killed by SIGTERM (signal 15)");
}

TEST(CommandTest, PastItsTimeTheWholeGroupIsKilled) {
  CommandOptions options;
  options.timeout = 300ms;
  // The background sleep is in the command's group: it must die too.
  const CommandResult result = runShell("sleep 30 & echo $!; wait", options);
  EXPECT_TRUE(result.timed_out);
  EXPECT_EQ(result.code, 128 + SIGKILL);
  const pid_t background = std::stoi(result.output);
  EXPECT_TRUE(eventually([&] { return ::kill(background, 0) != 0 && errno == ESRCH; }, 10s))
      << "the command's background child " << background << " outlived it";
}

TEST(CommandTest, PastItsTimeACallerThatAsksForItGetsAnException) {
  CommandOptions options;
  options.timeout = 100ms;
  options.throw_on_timeout = true;
  try {
    runShell("sleep 30", options);
    FAIL() << "no exception for a command past its time";
  } catch (const std::runtime_error& error) {
    EXPECT_EQ(std::string(error.what()), "'sh -c sleep 30' still runs after 100 ms");
  }
}

TEST(CommandTest, ADefaultPathIsAddedOnlyWhereNoneIsGiven) {
  EXPECT_EQ(withDefaultPath({{"A", "1"}}, "/bin"), (Environment{{"PATH", "/bin"}, {"A", "1"}}));
  EXPECT_EQ(withDefaultPath({{"A", "1"}, {"PATH", "/opt"}}, "/bin"),
            (Environment{{"A", "1"}, {"PATH", "/opt"}}));
}

}  // namespace
}  // namespace ddprun::test_support

// ddprund's command line, through the real binary: a bad flag is one line
// naming the flag, exit 2 (README's promise, not CLI11's own codes); --help
// is exit 0.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <vector>

#include "ddprun/launcher/subprocess.hpp"
#include "ddprun/test_support/daemon_process.hpp"
#include "ddprun/test_support/files.hpp"
#include "ddprun/test_support/temp_dir.hpp"

namespace ddprun::wire_test {
namespace {

using namespace std::chrono_literals;
using launcher::ExitStatus;
using test_support::DaemonProcess;

struct Outcome {
  ExitStatus status;
  std::string stderr_text;
  std::string stdout_text;
};

int countOf(const std::string& text, const std::string& needle) {
  int count = 0;
  for (auto at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) {
    ++count;
  }
  return count;
}

class DaemonCliTest : public ::testing::Test {
 protected:
  // Runs ddprund with `args` to its end; one still running after 10 s is
  // SIGKILLed (a bad flag must never start the server).
  Outcome run(const std::vector<std::string>& args) {
    launcher::SpawnOptions options;
    options.argv = {DaemonProcess::defaultBinary().string()};
    options.argv.insert(options.argv.end(), args.begin(), args.end());
    options.env = {{"PATH", "/usr/bin:/bin"}};
    const int err = ::open((dir_ / "stderr").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    const int out = ::open((dir_ / "stdout").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    options.stderr_fd = err;
    options.stdout_fd = out;
    launcher::Subprocess daemon(options);
    ::close(err);
    ::close(out);
    auto status = daemon.waitFor(10s);
    if (!status) {
      status = daemon.stop(1s);
    }
    return {*status, test_support::readFile(dir_ / "stderr"),
            test_support::readFile(dir_ / "stdout")};
  }

  test_support::TempDir dir_{"ddprun-daemon-cli"};
};

TEST_F(DaemonCliTest, ABadFlagIsOneLineNamingItAndExitTwo) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--bogus"}, "--bogus"},                         // unknown flag
      {{"--port", "abc"}, "--port"},                    // not a number
      {{"--port", "70000"}, "--port"},                  // out of range for a port
      {{"--threads", "0"}, "--threads"},                // outside 1..256
      {{"--legacy-dialect", "3"}, "--legacy-dialect"},  // not a choice
      {{"--request-timeout", "-1"}, "--request-timeout"},
      {{"--request-timeout", "1e300", "--port", "0"}, "--request-timeout"},  // overflows ms
      {{"--port"}, "--port"},                                                // a missing value
      {{"stray"}, "stray"},  // a positional argument
  };
  for (const auto& [args, flag] : cases) {
    const Outcome outcome = run(args);
    std::string what;
    for (const std::string& arg : args) {
      what += (what.empty() ? "" : " ") + arg;
    }
    EXPECT_EQ(outcome.status.describe(), "exited with code 2")
        << what << ": " << outcome.stderr_text;
    EXPECT_EQ(outcome.stderr_text.rfind("ddprund: ", 0), 0u) << what << ": " << outcome.stderr_text;
    EXPECT_EQ(countOf(outcome.stderr_text, "\n"), 1) << what << ": " << outcome.stderr_text;
    EXPECT_NE(outcome.stderr_text.find(flag), std::string::npos)
        << what << ": " << outcome.stderr_text;
    EXPECT_EQ(outcome.stdout_text, "") << what;
  }
}

TEST_F(DaemonCliTest, HelpIsExitZero) {
  const Outcome outcome = run({"--help"});
  EXPECT_EQ(outcome.status.describe(), "exited with code 0") << outcome.stderr_text;
  EXPECT_NE(outcome.stdout_text.find("--port"), std::string::npos) << outcome.stdout_text;
}

}  // namespace
}  // namespace ddprun::wire_test

// ddprund's command line and start-up, through the real binary: a bad flag is
// one line naming the flag, exit 2 (README's promise, not CLI11's own codes);
// --help is exit 0; a port already taken is one line naming every address
// tried, with the program's name once, exit 1.
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

// A second ddprund on the first one's port: every address it tried is named
// on one line, with "ddprund: " once; exit 1.
TEST_F(DaemonCliTest, APortAlreadyTakenIsOneLineNamingEveryAddressTried) {
  DaemonProcess first;
  const std::string port = std::to_string(first.port());
  const Outcome any = run({"--port", port});
  EXPECT_EQ(any.status.describe(), "exited with code 1") << any.stderr_text;
  EXPECT_EQ(any.stderr_text.rfind("ddprund: cannot listen", 0), 0u) << any.stderr_text;
  EXPECT_EQ(countOf(any.stderr_text, "ddprund"), 1) << any.stderr_text;
  EXPECT_EQ(countOf(any.stderr_text, "\n"), 1) << any.stderr_text;
  EXPECT_NE(any.stderr_text.find("0.0.0.0:" + port), std::string::npos) << any.stderr_text;

  const Outcome loopback = run({"--host", "127.0.0.1", "--port", port});
  EXPECT_EQ(loopback.status.describe(), "exited with code 1") << loopback.stderr_text;
  EXPECT_EQ(loopback.stderr_text,
            "ddprund: cannot listen (127.0.0.1:" + port + ": Address already in use)\n");
}

TEST_F(DaemonCliTest, AHostThatIsNotAnAddressIsOneLineAndExitTwo) {
  const Outcome outcome = run({"--host", "not-an-address", "--port", "0"});
  EXPECT_EQ(outcome.status.describe(), "exited with code 2") << outcome.stderr_text;
  EXPECT_EQ(outcome.stderr_text, "ddprund: --host 'not-an-address' is not an IP address\n");
}

}  // namespace
}  // namespace ddprun::wire_test

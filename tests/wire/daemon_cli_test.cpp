// ddprund's command line and start-up, through the real binary: a bad flag is
// one line naming the flag, exit 2 (README's promise, not CLI11's own codes);
// --help is exit 0; a port already taken is one line naming every address
// tried, with the program's name once, exit 1.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "ddprun/test_support/command.hpp"
#include "ddprun/test_support/daemon_process.hpp"

namespace ddprun::wire_test {
namespace {

using namespace std::chrono_literals;
using test_support::DaemonProcess;

using Outcome = test_support::CommandResult;  // output: stdout, errors: stderr

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
  Outcome run(const std::vector<std::string>& args) { return DaemonProcess::runToEnd(args); }
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
      {{"--run-retention", "0"}, "--run-retention"},                         // below 1 ms
      {{"--run-retention", "soon"}, "--run-retention"},
      {{"--port"}, "--port"},  // a missing value
      {{"stray"}, "stray"},    // a positional argument
  };
  for (const auto& [args, flag] : cases) {
    const Outcome outcome = run(args);
    std::string what;
    for (const std::string& arg : args) {
      what += (what.empty() ? "" : " ") + arg;
    }
    EXPECT_EQ(outcome.status.describe(), "exited with code 2") << what << ": " << outcome.errors;
    EXPECT_EQ(outcome.errors.rfind("ddprund: ", 0), 0u) << what << ": " << outcome.errors;
    EXPECT_EQ(countOf(outcome.errors, "\n"), 1) << what << ": " << outcome.errors;
    EXPECT_NE(outcome.errors.find(flag), std::string::npos) << what << ": " << outcome.errors;
    EXPECT_EQ(outcome.output, "") << what;
  }
}

TEST_F(DaemonCliTest, HelpIsExitZero) {
  const Outcome outcome = run({"--help"});
  EXPECT_EQ(outcome.status.describe(), "exited with code 0") << outcome.errors;
  EXPECT_NE(outcome.output.find("--port"), std::string::npos) << outcome.output;
}

// A second ddprund on the first one's port: every address it tried is named
// on one line, with "ddprund: " once; exit 1.
TEST_F(DaemonCliTest, APortAlreadyTakenIsOneLineNamingEveryAddressTried) {
  DaemonProcess first;
  const std::string port = std::to_string(first.port());
  const Outcome any = run({"--port", port});
  EXPECT_EQ(any.status.describe(), "exited with code 1") << any.errors;
  EXPECT_EQ(any.errors.rfind("ddprund: cannot listen", 0), 0u) << any.errors;
  EXPECT_EQ(countOf(any.errors, "ddprund"), 1) << any.errors;
  EXPECT_EQ(countOf(any.errors, "\n"), 1) << any.errors;
  EXPECT_NE(any.errors.find("0.0.0.0:" + port), std::string::npos) << any.errors;

  const Outcome loopback = run({"--host", "127.0.0.1", "--port", port});
  EXPECT_EQ(loopback.status.describe(), "exited with code 1") << loopback.errors;
  EXPECT_EQ(loopback.errors,
            "ddprund: cannot listen (127.0.0.1:" + port + ": Address already in use)\n");
}

TEST_F(DaemonCliTest, AHostThatIsNotAnAddressIsOneLineAndExitTwo) {
  const Outcome outcome = run({"--host", "not-an-address", "--port", "0"});
  EXPECT_EQ(outcome.status.describe(), "exited with code 2") << outcome.errors;
  EXPECT_EQ(outcome.errors, "ddprund: --host 'not-an-address' is not an IP address\n");
}

// "--token-file=" is "" as in argparse, never the next argument (CLI11
// alone took "--port" for the token file). "" names no file: most often an
// unset variable, refused rather than run without a token.
TEST_F(DaemonCliTest, AnEmptyValueIsOneLineNamingItsFlagNotTheNextOne) {
  for (const std::string& flag :
       std::vector<std::string>{"--token-file", "--port-file", "--metrics-port-file",
                                "--metrics-host", "--log-level", "--port", "--threads"}) {
    const Outcome outcome = run({flag + "=", "--port", "0", "--metrics-port", "0"});
    EXPECT_EQ(outcome.status.describe(), "exited with code 2") << flag << ": " << outcome.errors;
    EXPECT_EQ(outcome.errors, "ddprund: " + flag +
                                  ": empty value (an unset variable?); give a value or leave "
                                  "it out\n");
    EXPECT_EQ(outcome.output, "") << flag;
  }
}

// --host "" is every address, as when it is left out.
TEST_F(DaemonCliTest, AnEmptyHostIsEveryAddress) {
  DaemonProcess daemon({"--host="});
  EXPECT_GT(daemon.port(), 0);
  EXPECT_NE(daemon.stdoutText().find("ddprund listening on "), std::string::npos);
}

}  // namespace
}  // namespace ddprun::wire_test

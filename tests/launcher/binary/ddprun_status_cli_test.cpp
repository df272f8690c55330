// `ddprun status` run as a program, without a job: its flags (exit 2 with
// one line and the usage), a rendezvous that is not there or never answers
// (exit 1, one line naming the endpoint, within --timeout), a ddprund
// that holds no job, and a scripted rendezvous whose answers carry escape
// sequences (shown escaped; its own error reported as its own).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "ddprun/proto/rendezvous_status.hpp"
#include "ddprun/test_support/command.hpp"
#include "ddprun/test_support/daemon_process.hpp"
#include "ddprun/test_support/files.hpp"
#include "ddprun/test_support/silent_listener.hpp"
#include "scripted_store.hpp"

namespace ddprun::launcher {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
namespace protocol = proto::rendezvous;
using testing::ScriptedStore;

test_support::CommandResult status(std::vector<std::string> args) {
  std::vector<std::string> argv = {DDPRUN_BINARY, "status"};
  argv.insert(argv.end(), args.begin(), args.end());
  test_support::CommandOptions options;
  options.env = {{"PATH", "/usr/bin:/bin"}};
  return test_support::runCommand(argv, options);
}

std::string loopback(std::uint16_t port) { return "127.0.0.1:" + std::to_string(port); }

std::size_t lines(const std::string& text) {
  return static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n'));
}

// A bad flag is one line naming it, then the usage; nothing is asked.
TEST(DdprunStatusCliTest, BadFlagsAreOneLineAndTheUsageWithExitStatus2) {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{},
        {"--rdzv-endpoint", "h:1", "--bogus"},
        {"--rdzv-endpoint", "h:1", "--timeout", "soon"},
        {"--rdzv-endpoint", "h:99999"},
        {"--rdzv-endpoint", "h:1", "--rdzv-id", "a/b"},
        {"--rdzv-endpoint", "h:1", "--rdzv-backend", "etcd-v3"},
        {"--rdzv-endpoint", "h:1", "--rdzv-backend", "static"}}) {
    const auto result = status(args);
    EXPECT_EQ(result.code, 2) << result.errors;
    EXPECT_EQ(result.output, "");
    EXPECT_EQ(lines(result.errors), 2u) << result.errors;
    EXPECT_EQ(result.errors.rfind("ddprun status: ", 0), 0u) << result.errors;
    EXPECT_NE(result.errors.find("\nusage: ddprun status --rdzv-endpoint"), std::string::npos)
        << result.errors;
  }
  EXPECT_NE(status({"--rdzv-endpoint", "h:1", "--rdzv-backend", "etcd-v3"})
                .errors.find("reads c10d rendezvous"),
            std::string::npos);
}

// "--rdzv-id=" is "" as in argparse, never the next argument (CLI11 alone
// took "--rdzv-endpoint" for the run id and then missed the endpoint); ""
// means nothing here (no run id is the list of jobs: leave it out), so it
// is refused naming the option.
TEST(DdprunStatusCliTest, AnEmptyValueIsRefusedNamingItsOptionNotTheNextOne) {
  for (const auto& [args, option] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"--rdzv-id=", "--rdzv-endpoint", "h:1"}, "--rdzv-id"},
           {{"--rdzv-endpoint", "h:1", "--rdzv_id", ""}, "--rdzv_id"},
           {{"--rdzv-endpoint=", "--rdzv-id", "job"}, "--rdzv-endpoint"},
           {{"--timeout=", "--rdzv-endpoint", "h:1"}, "--timeout"},
           {{"--rdzv-backend=", "--rdzv-endpoint", "h:1"}, "--rdzv-backend"}}) {
    const auto result = status(args);
    EXPECT_EQ(result.code, 2) << result.errors;
    EXPECT_EQ(lines(result.errors), 2u) << result.errors;
    EXPECT_EQ(result.errors.rfind("ddprun status: " + option + ": empty value", 0), 0u)
        << result.errors;
  }
}

TEST(DdprunStatusCliTest, HelpDescribesTheFlagsAndExitStatuses) {
  const auto result = status({"--help"});
  EXPECT_EQ(result.code, 0) << result.errors;
  EXPECT_NE(result.output.find("--rdzv-endpoint"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("--json"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("Exit status"), std::string::npos) << result.output;
}

// Nothing listens: said at once (no retrying until the timeout), in one
// line naming the endpoint and why.
TEST(DdprunStatusCliTest, AnEndpointWhereNothingListensIsOneLineAndExitStatus1) {
  const std::uint16_t port = test_support::freeLoopbackPort();
  const auto start = Clock::now();
  const auto result = status({"--rdzv-endpoint", loopback(port), "--timeout", "30"});
  EXPECT_LT(Clock::now() - start, 10s) << "a refused connection is not retried";
  EXPECT_EQ(result.code, 1);
  EXPECT_EQ(result.output, "");
  EXPECT_EQ(lines(result.errors), 1u) << result.errors;
  EXPECT_NE(result.errors.find(loopback(port)), std::string::npos) << result.errors;
  EXPECT_NE(result.errors.find("refused"), std::string::npos) << result.errors;
}

// Something accepts the connection and never answers: given up at the
// timeout, in one line.
TEST(DdprunStatusCliTest, AnEndpointThatNeverAnswersIsGivenUpAtTheTimeout) {
  const test_support::SilentListener listener(4);
  const std::string endpoint = loopback(listener.port());
  const auto start = Clock::now();
  const auto result = status({"--rdzv-endpoint", endpoint, "--timeout", "1"});
  const auto took = Clock::now() - start;
  EXPECT_GE(took, 900ms);
  EXPECT_LT(took, 10s);
  EXPECT_EQ(result.code, 1);
  EXPECT_EQ(lines(result.errors), 1u) << result.errors;
  EXPECT_NE(result.errors.find(endpoint), std::string::npos) << result.errors;
}

TEST(DdprunStatusCliTest, ADaemonWithoutJobsSaysSoAndAnUnknownRunIsExitStatus1) {
  test_support::DaemonProcess daemon;
  const std::string endpoint = loopback(daemon.port());
  auto result = status({"--rdzv-endpoint", endpoint});
  EXPECT_EQ(result.code, 0) << result.errors;
  EXPECT_EQ(result.output, "no c10d rendezvous runs at " + endpoint + "\n");
  result = status({"--rdzv-endpoint", endpoint, "--json"});
  EXPECT_EQ(result.code, 0) << result.errors;
  EXPECT_EQ(nlohmann::json::parse(result.output),
            nlohmann::json::parse(R"({"jobs": [], "total": 0})"));
  result = status({"--rdzv-endpoint", endpoint, "--rdzv-id", "job7"});
  EXPECT_EQ(result.code, 1);
  EXPECT_EQ(result.output, "");
  EXPECT_EQ(result.errors,
            "ddprun status: no rendezvous 'job7' at " + endpoint + " (it holds none)\n");
}

// Text that would drive a terminal: ESC (clear the screen), BEL, a bidi
// override, and a newline that would forge a line of its own.
const std::string kHostile = "cannot \x1b[2J\x07 say\xe2\x80\xae\nddprun status: forged";
const std::string kHostileShown = "cannot \\x1b[2J\\x07 say\\u202e\\x0addprun status: forged";

std::string jobsKey() { return protocol::queryKey(protocol::kQueryJobs); }

// An error answer is the rendezvous' own error, quoted escaped on one line;
// it is no sign of an older ddprund.
TEST(DdprunStatusCliTest, ARendezvousErrorIsReportedAsItsOwnOnOneEscapedLine) {
  const ScriptedStore store(
      ScriptedStore::Answers{{jobsKey(), protocol::encodeQueryError({kHostile})}});
  const auto result = status({"--rdzv-endpoint", loopback(store.port())});
  EXPECT_EQ(result.code, 1);
  EXPECT_EQ(result.output, "");
  EXPECT_EQ(result.errors, "ddprun status: the rendezvous at " + loopback(store.port()) +
                               " answered with an error: " + kHostileShown + "\n");
}

// Only a question the rendezvous does not know says it is older than ddprun.
TEST(DdprunStatusCliTest, AnUnknownQuestionIsTakenForAnOlderDdprund) {
  const ScriptedStore store(ScriptedStore::Answers{
      {jobsKey(), protocol::encodeQueryError({"no such question: 'jobs'"})}});
  const auto result = status({"--rdzv-endpoint", loopback(store.port())});
  EXPECT_EQ(result.code, 1);
  EXPECT_EQ(result.errors, "ddprun status: the rendezvous at " + loopback(store.port()) +
                               " does not answer ddprun status (a ddprund older than this "
                               "ddprun?): no such question: 'jobs'\n");
}

// Run ids are the agents' bytes: in the table, in --json and in the line
// that names the runs held, none reaches the terminal as it was sent.
TEST(DdprunStatusCliTest, RunIdsTheRendezvousHoldsAreShownEscaped) {
  const std::string run_id = "evil\x1b]0;owned\x07\xe2\x80\xae\xc2\x9b";
  protocol::JobSummary job;
  job.run_id = run_id;
  job.state = protocol::JobState::kRunning;
  const ScriptedStore store(
      ScriptedStore::Answers{{jobsKey(), protocol::encodeJobList({{job}, std::nullopt})},
                             {protocol::queryKey(protocol::statusQuestion("job7")),
                              protocol::encodeQueryError({"no rendezvous 'job7' here"})}});
  const std::string endpoint = loopback(store.port());
  const std::string shown = "evil\\x1b]0;owned\\x07\\u202e\\u009b";
  auto result = status({"--rdzv-endpoint", endpoint});
  EXPECT_EQ(result.code, 0) << result.errors;
  EXPECT_NE(result.output.find("\n" + shown + "  running"), std::string::npos) << result.output;
  result = status({"--rdzv-endpoint", endpoint, "--json"});
  EXPECT_EQ(result.code, 0) << result.errors;
  EXPECT_NE(result.output.find(R"("evil\u001b]0;owned\u0007\u202e\u009b")"), std::string::npos)
      << result.output;
  EXPECT_EQ(nlohmann::json::parse(result.output)["jobs"][0]["run_id"], run_id);
  result = status({"--rdzv-endpoint", endpoint, "--rdzv-id", "job7"});
  EXPECT_EQ(result.code, 1);
  EXPECT_EQ(result.errors,
            "ddprun status: no rendezvous 'job7' at " + endpoint + " (it holds " + shown + ")\n");
}

// A rendezvous that holds more runs than its answer lists (a ddprund caps
// it): the table says so, and an unknown run's line counts every run held.
TEST(DdprunStatusCliTest, ACappedListSaysHowManyRunsTheRendezvousHolds) {
  protocol::JobSummary job;
  job.run_id = "job1";
  job.state = protocol::JobState::kClosed;
  const ScriptedStore store(
      ScriptedStore::Answers{{jobsKey(), protocol::encodeJobList({{job}, 5000})},
                             {protocol::queryKey(protocol::statusQuestion("job7")),
                              protocol::encodeQueryError({"no rendezvous 'job7' here"})}});
  const std::string endpoint = loopback(store.port());
  auto result = status({"--rdzv-endpoint", endpoint});
  EXPECT_EQ(result.code, 0) << result.errors;
  EXPECT_NE(result.output.find("\n(1 of the 5000 runs it holds, open ones first: --rdzv-id ID "
                               "shows any one)\n"),
            std::string::npos)
      << result.output;
  result = status({"--rdzv-endpoint", endpoint, "--rdzv-id", "job7"});
  EXPECT_EQ(result.code, 1);
  EXPECT_EQ(result.errors, "ddprun status: no rendezvous 'job7' at " + endpoint +
                               " (it holds job1 and 4999 more)\n");
}

}  // namespace
}  // namespace ddprun::launcher

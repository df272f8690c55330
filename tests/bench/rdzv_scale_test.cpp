// rdzv_scale run small against this build tree's ddprund: a whole job of 8
// simulated agents ends with its result line and table, a lost node 0 is
// recovered from too, bad flags are one line and status 2, and a run whose
// ddprund cannot start or dies is one line and status 1.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <regex>
#include <string>
#include <vector>

#include "ddprun/launcher/process/subprocess.hpp"
#include "ddprun/test_support/command.hpp"
#include "ddprun/test_support/eventually.hpp"
#include "ddprun/test_support/files.hpp"
#include "ddprun/test_support/proc_status.hpp"
#include "ddprun/test_support/temp_dir.hpp"

namespace ddprun::bench {
namespace {

using namespace std::chrono_literals;

// Each phase takes milliseconds here; a stuck one is named well within the
// command's timeout.
test_support::CommandResult rdzvScale(std::vector<std::string> args) {
  std::vector<std::string> argv = {DDPRUN_RDZV_SCALE, "--phase-timeout", "20", "--skip-store"};
  argv.insert(argv.end(), args.begin(), args.end());
  test_support::CommandOptions options;
  options.env = {{"PATH", "/usr/bin:/bin"}};
  options.timeout = 60s;
  return test_support::runCommand(argv, options);
}

std::vector<std::string> linesOf(const std::string& text) {
  std::vector<std::string> lines;
  std::string line;
  for (const char c : text) {
    if (c == '\n') {
      lines.push_back(line);
      line.clear();
    } else {
      line += c;
    }
  }
  if (!line.empty()) {
    lines.push_back(line);
  }
  return lines;
}

const std::regex kResultLine(
    R"(agents=8 join_to_round_ms=[0-9]+\.[0-9]{2} recovery_ms=[0-9]+\.[0-9]{2} )"
    R"(daemon_rss_mib=[0-9]+\.[0-9] daemon_cpu_s=[0-9]+\.[0-9]{2} )"
    R"(done_to_finished_ms=[0-9]+\.[0-9]{2} tool_cpu_s=[0-9]+\.[0-9]{2})");

// Heartbeats every 50 ms over a 0.3 s hold, so they flow during the job.
TEST(RdzvScaleTest, EightAgentsRunAJobToItsEndAndSayHowItWent) {
  const auto result =
      rdzvScale({"--agents", "8", "--hold", "0.3", "--keep-alive-interval", "0.05"});
  ASSERT_EQ(result.code, 0) << result.errors;
  const auto lines = linesOf(result.output);
  ASSERT_FALSE(lines.empty());
  EXPECT_TRUE(std::regex_match(lines.front(), kResultLine)) << lines.front();
  // The daemon was measured: it has a resident set.
  EXPECT_EQ(lines.front().find("daemon_rss_mib=0.0"), std::string::npos) << lines.front();
  EXPECT_NE(result.output.find("\n| 8 | "), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("targets are set at 128, 1,000 and 10,000 agents only"),
            std::string::npos);
  EXPECT_NE(result.output.find("group rank 4 of 8"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("\nMachine: "), std::string::npos) << result.output;
  // 8 agents, one beat each 50 ms for 0.3 s: about 48; at least a few.
  const std::regex beats("heartbeats sent: ([0-9]+) while it ran");
  std::smatch match;
  ASSERT_TRUE(std::regex_search(result.output, match, beats)) << result.output;
  EXPECT_GE(std::stoi(match[1]), 8);
}

// Without --skip-store the same run goes on to the store's tables, each
// beside its target: one run prints every scale figure.
TEST(RdzvScaleTest, OneRunPrintsTheAgentsAndThenTheStoreAtScale) {
  test_support::CommandOptions options;
  options.env = {{"PATH", "/usr/bin:/bin"}};
  options.timeout = 60s;
  const auto result = test_support::runCommand(
      {DDPRUN_RDZV_SCALE, "--agents", "4", "--hold", "0", "--store-clients", "40", "--store-growth",
       "40", "--store-cpu-connections", "4", "--store-cpu-seconds", "0.15", "--store-repeat", "1",
       "--libtorch-server", "/nonexistent/libtorch_store_server"},
      options);
  ASSERT_EQ(result.code, 0) << result.errors;
  const std::size_t agents = result.output.find("agents=4 join_to_round_ms=");
  const std::size_t store = result.output.find("\n## The store at scale\n");
  ASSERT_NE(agents, std::string::npos) << result.output;
  ASSERT_NE(store, std::string::npos) << result.output;
  EXPECT_LT(agents, store);
  // ddprund's barrier row: 40 connections, every client answered.
  EXPECT_NE(result.output.find("| ddprund | 1.13 |", store), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("| ddprund | 2.x |", store), std::string::npos) << result.output;
}

// Node 0 is lost: the next survivor becomes node 0 and must send
// store_ready before the others are told the new round.
TEST(RdzvScaleTest, ALostNodeZeroIsRecoveredFrom) {
  const auto result = rdzvScale({"--agents", "3,4", "--victim-rank", "0", "--hold", "0"});
  ASSERT_EQ(result.code, 0) << result.errors;
  EXPECT_NE(result.output.find("agents=3 "), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("agents=4 "), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("group rank 0 of 3, 0 of 4"), std::string::npos) << result.output;
}

TEST(RdzvScaleTest, BadFlagsAreOneLineWithStatus2) {
  for (const std::vector<std::string>& args : {std::vector<std::string>{"--agents", "1"},
                                               {"--agents", "eight"},
                                               {"--bogus"},
                                               {"--agents", "4,8", "--victim-rank", "4"},
                                               {"--keep-alive-interval", "0"},
                                               {"--source-addresses", "300"}}) {
    const auto result = rdzvScale(args);
    EXPECT_EQ(result.code, 2) << args.front() << ": " << result.errors;
    EXPECT_EQ(result.output, "");
    ASSERT_EQ(linesOf(result.errors).size(), 1u) << result.errors;
    EXPECT_EQ(result.errors.rfind("rdzv_scale: ", 0), 0u) << result.errors;
  }
  EXPECT_NE(rdzvScale({"--agents", "4,8", "--victim-rank", "4"})
                .errors.find("--victim-rank: 4 is not a group rank of 4 agents"),
            std::string::npos);
}

TEST(RdzvScaleTest, ADdprundThatCannotStartIsOneLineWithStatus1) {
  const auto result = rdzvScale({"--agents", "2", "--ddprund", "/nonexistent/ddprund"});
  EXPECT_EQ(result.code, 1) << result.errors;
  EXPECT_EQ(result.output, "");
  const auto lines = linesOf(result.errors);
  ASSERT_FALSE(lines.empty());
  EXPECT_EQ(lines.back().rfind("rdzv_scale: ", 0), 0u) << result.errors;
  EXPECT_NE(lines.back().find("/nonexistent/ddprund"), std::string::npos) << result.errors;
}

// ddprund SIGKILLed while the job runs: the run ends at once, saying so.
TEST(RdzvScaleTest, ADaemonThatDiesEndsTheRunWithOneLine) {
  test_support::TempDir dir("rdzv-scale-test");
  const auto errors = dir / "stderr";
  const int errors_fd = ::open(errors.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  ASSERT_GE(errors_fd, 0);
  launcher::SpawnOptions options;
  options.argv = {DDPRUN_RDZV_SCALE, "--agents", "4", "--hold", "60", "--skip-store"};
  options.env = {{"PATH", "/usr/bin:/bin"}};
  options.stderr_fd = errors_fd;
  const int null_fd = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  options.stdout_fd = null_fd;
  launcher::Subprocess tool(options);
  ::close(errors_fd);
  ::close(null_fd);
  // The clock queries end as the job starts to run (the hold).
  ASSERT_TRUE(test_support::eventually(
      [&] { return test_support::readFile(errors).find("clock queries:") != std::string::npos; },
      30s))
      << test_support::readFile(errors);
  const auto daemon = test_support::childNamed(tool.pid(), "ddprund");
  ASSERT_TRUE(daemon);
  ASSERT_EQ(::kill(*daemon, SIGKILL), 0);
  const auto status = tool.waitFor(20s);
  ASSERT_TRUE(status) << "rdzv_scale still runs 20 s after its ddprund died";
  EXPECT_EQ(status->shellCode(), 1);
  const auto lines = linesOf(test_support::readFile(errors));
  ASSERT_FALSE(lines.empty());
  EXPECT_EQ(lines.back(), "rdzv_scale: holding: ddprund ended (signal 9)")
      << test_support::readFile(errors);
}

}  // namespace
}  // namespace ddprun::bench

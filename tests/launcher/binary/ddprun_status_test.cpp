// `ddprun status` against real jobs: two ddprun agents with fake workers on
// loopback, an external ddprund or the agent that hosts the rendezvous. It
// shows both members; after one agent is SIGKILLed, the re-formed round
// (round up, one member) and the lost node with its reason. A static
// rendezvous's node 0 gets one line instead.
#include <gtest/gtest.h>
#include <signal.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "ddprun/test_support/command.hpp"
#include "ddprun/test_support/daemon_process.hpp"
#include "ddprun/test_support/eventually.hpp"
#include "ddprun/test_support/files.hpp"
#include "elastic_fixture.hpp"

namespace ddprun::launcher {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using testing::ElasticTest;

class DdprunStatusTest : public ElasticTest {
 protected:
  test_support::CommandResult status(std::uint16_t port, std::vector<std::string> args = {}) {
    std::vector<std::string> argv = {DDPRUN_BINARY, "status", "--rdzv-endpoint",
                                     "127.0.0.1:" + std::to_string(port)};
    argv.insert(argv.end(), args.begin(), args.end());
    test_support::CommandOptions options;
    options.env = {{"PATH", "/usr/bin:/bin"}};
    return test_support::runCommand(argv, options);
  }

  // job7's status as JSON; null when it could not be asked.
  json statusJson(std::uint16_t port) {
    const auto result = status(port, {"--rdzv-id", "job7", "--json"});
    return result.code == 0 ? json::parse(result.output) : json();
  }

  // The agent id of node `name`: the member at the group rank its workers got.
  std::string agentOf(const json& job, const std::string& name) {
    const int group_rank = std::stoi(env(name, 0)["GROUP_RANK"]);
    return job.at("members").at(static_cast<std::size_t>(group_rank)).at("agent");
  }
};

TEST_F(DdprunStatusTest, ShowsBothMembersThenTheReformedRoundAndTheLostNode) {
  test_support::DaemonProcess daemon;
  Subprocess a = agent("a", "1:2", daemon.port(), {"--hang"}, {"--max-restarts", "3"});
  Subprocess b = agent("b", "1:2", daemon.port(), {"--hang"}, {"--max-restarts", "3"});
  ASSERT_TRUE(test_support::eventually([&] { return ready("a") && ready("b"); }, 30s))
      << log("a") << log("b");
  const json before = statusJson(daemon.port());
  ASSERT_FALSE(before.is_null());
  EXPECT_EQ(before.at("state"), "running");
  EXPECT_EQ(before.at("round"), 0);
  EXPECT_EQ(before.at("world_size"), 4);
  ASSERT_EQ(before.at("members").size(), 2u) << before.dump(2);
  EXPECT_EQ(before.at("rendezvous_host"), "") << "an external ddprund";
  EXPECT_EQ(before.at("restarts_left"), 3);
  const std::string a_id = agentOf(before, "a");
  const std::string b_id = agentOf(before, "b");
  const auto table = status(daemon.port(), {"--rdzv-id", "job7"});
  EXPECT_EQ(table.code, 0) << table.errors;
  EXPECT_NE(table.output.find(a_id), std::string::npos) << table.output;
  EXPECT_NE(table.output.find(b_id), std::string::npos) << table.output;
  EXPECT_NE(table.output.find("lost (newest first): none"), std::string::npos) << table.output;

  ::kill(b.pid(), SIGKILL);
  json after;
  ASSERT_TRUE(test_support::eventually(
      [&] {
        after = statusJson(daemon.port());
        return !after.is_null() && after.at("round") == 1 && after.at("state") == "running";
      },
      30s))
      << after.dump(2) << log("a");
  ASSERT_EQ(after.at("members").size(), 1u) << after.dump(2);
  EXPECT_EQ(after.at("members")[0].at("agent"), a_id);
  EXPECT_EQ(after.at("world_size"), 2);
  ASSERT_EQ(after.at("losses").size(), 1u) << after.dump(2);
  const json& loss = after.at("losses")[0];
  EXPECT_EQ(loss.at("agent"), b_id);
  EXPECT_EQ(loss.at("reason"), "connection_closed");
  EXPECT_EQ(loss.at("round"), 0);
  EXPECT_EQ(loss.at("was_member"), true);
  const auto lost_table = status(daemon.port(), {"--rdzv-id", "job7"});
  EXPECT_NE(lost_table.output.find(b_id + "  "), std::string::npos) << lost_table.output;
  EXPECT_NE(lost_table.output.find("its connection closed (the agent exited or was killed)"),
            std::string::npos)
      << lost_table.output;
  const auto jobs = status(daemon.port());
  EXPECT_NE(jobs.output.find("job7    running  1      1      0       2"), std::string::npos)
      << jobs.output;
  const auto unknown = status(daemon.port(), {"--rdzv-id", "job8"});
  EXPECT_EQ(unknown.code, 1);
  EXPECT_EQ(unknown.errors, "ddprun status: no rendezvous 'job8' at 127.0.0.1:" +
                                std::to_string(daemon.port()) + " (it holds job7)\n");
  b.wait();
  a.stop(10s);
}

// A worker's failure restarts the job (counted): the failing agent's report
// reaches the rendezvous, and status names the rank, how it ended, and the
// restarts used and left.
TEST_F(DdprunStatusTest, ShowsTheFailureThatRestartedTheJob) {
  test_support::DaemonProcess daemon;
  const std::vector<std::string> restarts = {"--max-restarts", "2"};
  Subprocess a = agent("a", "2", daemon.port(), {"--hang"}, restarts);
  Subprocess b = agent("b", "2", daemon.port(), {"--exit", "7", "--only-attempt", "0"}, restarts);
  json job;
  // b's local rank 0 may be stopped before it wrote its environment, and the
  // round runs before the restarted workers write theirs: wait for the file.
  ASSERT_TRUE(test_support::eventually(
      [&] {
        job = statusJson(daemon.port());
        return !job.is_null() && job.at("round") == 1 && job.at("state") == "running" &&
               !job.at("last_failure").is_null() && env("b", 0).count("GROUP_RANK") == 1;
      },
      30s))
      << job.dump(2) << log("a") << log("b");
  const json& failure = job.at("last_failure");
  EXPECT_EQ(failure.at("agent"), agentOf(job, "b"));
  EXPECT_EQ(failure.at("round"), 0);
  EXPECT_EQ(failure.at("exit_code"), 7);
  EXPECT_TRUE(failure.at("signal").is_null());
  EXPECT_EQ(failure.at("reason"), "exited with code 7");
  EXPECT_EQ(failure.at("ended_job"), false);
  const int first_rank = std::stoi(env("b", 0)["RANK"]);
  EXPECT_TRUE(failure.at("rank") == first_rank || failure.at("rank") == first_rank + 1)
      << failure.dump();
  EXPECT_EQ(job.at("restarts_used"), 1);
  EXPECT_EQ(job.at("restarts_left"), 1);
  const json& b_member = job.at("members").at(std::stoul(env("b", 0)["GROUP_RANK"]));
  EXPECT_EQ(b_member.at("restarts_used"), 1);
  EXPECT_EQ(b_member.at("max_restarts"), 2);
  const auto table = status(daemon.port(), {"--rdzv-id", "job7"});
  EXPECT_NE(table.output.find("restarts:      1 used, 1 left"), std::string::npos) << table.output;
  EXPECT_NE(table.output.find("exited with code 7"), std::string::npos) << table.output;
  a.stop(10s);
  b.stop(10s);
}

// With no restart left the failing agent aborts the job: status says it
// failed, where, and its root cause.
TEST_F(DdprunStatusTest, ShowsTheRootCauseThatEndedTheJob) {
  test_support::DaemonProcess daemon;
  // b is node 1 (ranks 2 and 3): its rank 3 is SIGKILLed, rank 2 succeeds.
  Subprocess a = agent("a", "2", daemon.port(), {"--hang"}, {"--node-rank", "0"});
  Subprocess b =
      agent("b", "2", daemon.port(), {"--only-rank", "3", "--signal", "9"}, {"--node-rank", "1"});
  EXPECT_EQ(b.wait().shellCode(), 128 + 9) << log("b");
  EXPECT_EQ(a.wait().shellCode(), 1) << log("a");
  const json job = statusJson(daemon.port());
  ASSERT_FALSE(job.is_null());
  EXPECT_EQ(job.at("state"), "failed");
  const json& failure = job.at("last_failure");
  ASSERT_FALSE(failure.is_null()) << job.dump(2);
  EXPECT_EQ(job.at("failed_on"), failure.at("agent"));
  EXPECT_EQ(failure.at("rank"), 3);
  EXPECT_EQ(failure.at("signal"), 9);
  EXPECT_EQ(failure.at("reason"), "killed by SIGKILL (signal 9)");
  EXPECT_EQ(failure.at("ended_job"), true);
  const auto table = status(daemon.port(), {"--rdzv-id", "job7"});
  EXPECT_NE(table.output.find("state:         failed: the restarts of " +
                              failure.at("agent").get<std::string>() + " were spent"),
            std::string::npos)
      << table.output;
}

// The agent at the endpoint hosts the rendezvous: it answers as a ddprund
// does, and names itself as the host.
TEST_F(DdprunStatusTest, AnswersFromTheAgentThatHostsTheRendezvous) {
  const std::uint16_t port = test_support::freeLoopbackPort();
  Subprocess a = agent("a", "2", port, {"--hang"});
  Subprocess b = agent("b", "2", port, {"--hang"});
  ASSERT_TRUE(test_support::eventually([&] { return ready("a") && ready("b"); }, 30s))
      << log("a") << log("b");
  const json job = statusJson(port);
  ASSERT_FALSE(job.is_null());
  EXPECT_EQ(job.at("state"), "running");
  ASSERT_EQ(job.at("members").size(), 2u) << job.dump(2);
  const std::string host = job.at("rendezvous_host");
  EXPECT_TRUE(host == agentOf(job, "a") || host == agentOf(job, "b")) << job.dump(2);
  const auto table = status(port, {"--rdzv-id", "job7"});
  EXPECT_NE(table.output.find("(the agent " + host + ", embedded)"), std::string::npos)
      << table.output;
  a.stop(10s);
  b.stop(10s);
}

// Node 0 of a static rendezvous serves a store, not a rendezvous to ask.
TEST_F(DdprunStatusTest, AStaticRendezvousIsOneLineNotAHang) {
  const std::uint16_t port = test_support::freeLoopbackPort();
  Subprocess node0 =
      launch("a", {"--nnodes", "2", "--node-rank", "0", "--master-addr", "127.0.0.1",
                   "--master-port", std::to_string(port), "--no-python", DDPRUN_FAKE_WORKER});
  test_support::CommandResult result;
  ASSERT_TRUE(test_support::eventually(
      [&] {
        result = status(port);
        return result.code == 1 && result.errors.find("static") != std::string::npos;
      },
      30s))
      << result.errors << log("a");
  EXPECT_EQ(result.errors, "ddprun status: the store at 127.0.0.1:" + std::to_string(port) +
                               " is node 0's of static rendezvous 'none', which has no daemon "
                               "to ask: ddprun status reads c10d rendezvous\n");
  node0.stop(10s);
}

}  // namespace
}  // namespace ddprun::launcher

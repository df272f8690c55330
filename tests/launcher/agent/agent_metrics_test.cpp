// What `ddprun --metrics-port` shows of an agent (AgentMetrics), with real
// worker processes (fake_worker) and a scripted rendezvous: a run with one
// crash and its restart leaves exact counts; the numbers are live while the
// workers run; promtool accepts the scrape.
#include "ddprun/launcher/observe/agent_metrics.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <future>

#include "ddprun/launcher/agent/agent.hpp"
#include "ddprun/test_support/eventually.hpp"
#include "ddprun/test_support/prometheus.hpp"
#include "ddprun/test_support/temp_dir.hpp"
#include "fake_rendezvous.hpp"
#include "fake_worker_config.hpp"

namespace ddprun::launcher {
namespace {

using namespace std::chrono_literals;
using testing::FakeRendezvous;
using testing::singleNode;

class AgentMetricsTest : public ::testing::Test {
 protected:
  std::string scrape() const {
    metrics::Exposition out;
    metrics_.collect(out);
    return out.text();
  }

  double value(const std::string& series) const {
    const auto found = test_support::seriesValue(scrape(), series);
    EXPECT_TRUE(found.has_value()) << series << " missing from:\n" << scrape();
    return found.value_or(-1);
  }

  AgentConfig config(FakeRendezvous& rendezvous, std::vector<std::string> worker_args) {
    WorkerEnvironment::Job job;
    job.run_id = "metrics";
    AgentConfig config = testing::fakeWorkerConfig(rendezvous, 2, std::move(worker_args), 1, job,
                                                   {{"PATH", "/usr/bin:/bin"}});
    config.events = &metrics_;
    return config;
  }

  AgentMetrics metrics_{2, 1, {{"host", "node-a"}, {"run_id", "metrics"}}};
};

// Rank 0 exits 3 on attempt 0; the group restarts once and succeeds.
TEST_F(AgentMetricsTest, ACrashAndItsRestartLeaveExactCounts) {
  FakeRendezvous rendezvous(singleNode(2));
  const RunResult result =
      Agent(config(rendezvous, {"--only-rank", "0", "--only-attempt", "0", "--exit", "3"})).run();
  ASSERT_EQ(result.exit_code, 0);
  EXPECT_EQ(value("ddprun_agent_info{host=\"node-a\",run_id=\"metrics\"}"), 1);
  EXPECT_EQ(value("ddprun_attempt"), 1);
  EXPECT_EQ(value("ddprun_world_size"), 2);
  EXPECT_EQ(value("ddprun_group_rank"), 0);
  EXPECT_EQ(value("ddprun_group_world_size"), 1);
  EXPECT_EQ(value("ddprun_local_world_size"), 2);
  EXPECT_EQ(value("ddprun_workers_started_total"), 4);
  EXPECT_EQ(value("ddprun_worker_failures_total"), 1);
  EXPECT_EQ(value("ddprun_restarts_total"), 1);
  EXPECT_EQ(value("ddprun_max_restarts"), 1);
  EXPECT_EQ(value("ddprun_rounds_joined_total"), 2);
  EXPECT_EQ(value("ddprun_group_stops_total{reason=\"failure\"}"), 1);
  EXPECT_EQ(value("ddprun_group_stops_total{reason=\"round_over\"}"), 0);
  // The last group's workers both succeeded.
  EXPECT_EQ(value("ddprun_local_workers{state=\"running\"}"), 0);
  EXPECT_EQ(value("ddprun_local_workers{state=\"exited\"}"), 2);
  EXPECT_EQ(value("ddprun_local_workers{state=\"failed\"}"), 0);
  EXPECT_EQ(value("ddprun_last_worker_exit_code"), 0);
  EXPECT_EQ(value("ddprun_exit_code"), 0);
  EXPECT_EQ(value("ddprun_rendezvous_waiting"), 0);
  EXPECT_EQ(value("ddprun_rendezvous_wait_seconds_count"), 2);
  EXPECT_GE(value("ddprun_last_rendezvous_wait_seconds"), 0);
}

TEST_F(AgentMetricsTest, TheLastExitCodeOfAFailureWithNoRestartLeft) {
  FakeRendezvous rendezvous(singleNode(2));
  AgentConfig agent = config(rendezvous, {"--only-rank", "1", "--signal", "9"});
  agent.max_restarts = 0;
  const RunResult result = Agent(std::move(agent)).run();
  ASSERT_EQ(result.exit_code, 137);
  EXPECT_EQ(value("ddprun_local_workers{state=\"failed\"}"), 1);
  EXPECT_EQ(value("ddprun_exit_code"), 137);
  EXPECT_EQ(value("ddprun_restarts_total"), 0);
  EXPECT_EQ(value("ddprun_worker_failures_total"), 1);
}

// Before a group, the agent is waiting and shows no group; while its
// workers run, they are counted as running.
TEST_F(AgentMetricsTest, TheNumbersAreLiveWhileTheAgentWaitsAndItsWorkersRun) {
  test_support::TempDir dir;
  const std::string release = (dir / "release").string();
  FakeRendezvous rendezvous;  // scripted: nothing until the test pushes a group
  auto run = std::async(std::launch::async, [&] {
    return Agent(config(rendezvous, {"--after", release})).run();
  });
  ASSERT_TRUE(
      test_support::eventually([&] { return value("ddprun_rendezvous_waiting") == 1; }, 10s));
  EXPECT_FALSE(test_support::seriesValue(scrape(), "ddprun_attempt").has_value());
  rendezvous.push(singleNode(2));
  EXPECT_TRUE(test_support::eventually(
      [&] { return value("ddprun_local_workers{state=\"running\"}") == 2; }, 10s));
  EXPECT_EQ(value("ddprun_rendezvous_waiting"), 0);
  EXPECT_EQ(value("ddprun_attempt"), 0);
  std::ofstream(release) << "go\n";
  ASSERT_EQ(run.wait_for(30s), std::future_status::ready);
  EXPECT_EQ(run.get().exit_code, 0);
  EXPECT_EQ(value("ddprun_local_workers{state=\"exited\"}"), 2);
}

TEST_F(AgentMetricsTest, PromtoolAcceptsTheScrape) {
  FakeRendezvous rendezvous(singleNode(2));
  ASSERT_EQ(Agent(config(rendezvous, {"--only-rank", "0", "--only-attempt", "0", "--exit", "3"}))
                .run()
                .exit_code,
            0);
  const std::string text = scrape();
  const test_support::CommandResult check = test_support::promtoolCheckMetrics(text);
  EXPECT_EQ(check.code, 0) << check.output << "\n---\n" << text;
  EXPECT_EQ(check.output, "") << text;
}

}  // namespace
}  // namespace ddprun::launcher

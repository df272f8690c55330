// The job seen from outside, on real test hosts: a 2-host c10d job of `train`
// under an external ddprund on h0, every program serving its metrics, and a
// real Prometheus on h0 scraping them. One host's agent is SIGKILLed
// mid-training (ddprun's pid, as a lost machine's would go). Then
//  - `ddprun status` shows the re-formed round and the lost node;
//  - Prometheus has scraped the loss (ddprund) and the survivor's restart of
//    its workers in a smaller world (its agent);
//  - `ddprun timeline` merges both nodes' files into one trace: the killed
//    node's cut short, with the snapshots its workers reported up to the
//    kill, then the survivor's stop and its next round.
#include <signal.h>

#include <nlohmann/json.hpp>
#include <optional>
#include <regex>

#include "ddprun/proto/rendezvous_status.hpp"
#include "ddprun/test_support/prometheus.hpp"
#include "ddprun/test_support/trace_check.hpp"
#include "namespace_thread.hpp"
#include "netns_train_fixture.hpp"

namespace ddprun::netns_test {
namespace {

using json = nlohmann::json;
namespace status = proto::rendezvous;

// Each host is a network namespace of its own: fixed ports cannot collide.
constexpr int kAgentMetricsPort = 9464;
constexpr int kDaemonMetricsPort = 9465;

using test_support::traceEvents;

std::vector<json> named(const std::vector<json>& all, const std::string& name, int pid) {
  return test_support::eventsNamed(all, name, pid);
}

class NetnsObserveTest : public NetnsTrainTest {
 protected:
  void startDaemonWithMetrics() {
    daemon_.emplace(ipBinary(),
                    std::vector<std::string>{"netns", "exec", lab_->namespaceOf("h0"),
                                             DDPRUND_BINARY, "--host", lab_->address("h0"),
                                             "--metrics-port", std::to_string(kDaemonMetricsPort)});
  }

  std::string target(const std::string& host, int port) const {
    return lab_->address(host) + ":" + std::to_string(port);
  }

  // `ddprun <args>` run to its end on h0, as an operator there would.
  CommandResult ddprunOnH0(std::vector<std::string> args) const {
    args.insert(args.begin(), DDPRUN_BINARY);
    return runCommand(lab_->onHost("h0", args));
  }
};

TEST_F(NetnsObserveTest, AKilledNodeIsSeenInStatusInPrometheusAndOnTheTimeline) {
  buildLab(2, /*with_daemon=*/false);
  startDaemonWithMetrics();
  NamespaceThread h0(lab_->namespaceOf("h0"));
  std::optional<test_support::PrometheusServer> prometheus;
  h0.run([&] {
    prometheus.emplace(std::vector<test_support::ScrapeJob>{
        {"ddprund", {target("h0", kDaemonMetricsPort)}},
        {"ddprun", {target("h1", kAgentMetricsPort), target("h2", kAgentMetricsPort)}}});
  });
  // Prometheus is queried from h0 too, where it listens.
  const auto value = [&](const std::string& expr) {
    const auto samples = h0.run([&] { return prometheus->query(expr); });
    return samples.empty() ? -1.0 : samples.front().value;
  };
  // Every series of `expr` with its labels, for a failed check's message.
  const auto series = [&](const std::string& expr) {
    std::string text;
    for (const auto& sample : h0.run([&] { return prometheus->query(expr); })) {
      text += "  " + expr + " {";
      for (const auto& [label, label_value] : sample.labels) {
        text += label + "=" + label_value + " ";
      }
      text += "} " + std::to_string(sample.value) + "\n";
    }
    return text;
  };

  constexpr int kEpochs = 30;
  const std::vector<std::string> program = train(kEpochs, {"--samples", "20000"});
  const std::vector<std::string> metrics = {"--metrics-port", std::to_string(kAgentMetricsPort)};
  Subprocess a = agent("a", "h1", "1:2", program, metrics);
  Subprocess b = agent("b", "h2", "1:2", program, metrics);
  ASSERT_TRUE(test_support::eventually(
      [&] {
        return groupRank("a", 0) >= 0 && groupRank("b", 0) >= 0 &&
               savesAfter(log("a") + log("b"), 0) >= 2;
      },
      120s, 20ms))
      << logs({"a", "b"});
  ASSERT_TRUE(test_support::eventually([&] { return value("count(up == 1)") == 3; }, 30s, 200ms))
      << "Prometheus does not scrape all three: " << prometheus->logTail();

  // Node 0 goes: it hosted the workers' store, and its rank 0 wrote the
  // snapshots its timeline can only show through the merge.
  const std::string victim = groupRank("a", 0) == 0 ? "a" : "b";
  const std::string survivor = victim == "a" ? "b" : "a";
  Subprocess& victim_agent = victim == "a" ? a : b;
  Subprocess& survivor_agent = survivor == "a" ? a : b;
  const std::string survivor_target = target(survivor == "a" ? "h1" : "h2", kAgentMetricsPort);
  ASSERT_EQ(::kill(victim_agent.pid(), SIGKILL), 0);
  victim_agent.wait();
  const std::regex alone(R"(round ([0-9]+): node 0 of 1, ranks 0\.\.1 of 2)");
  ASSERT_TRUE(
      test_support::eventually([&] { return std::regex_search(log(survivor), alone); }, 30s, 10ms))
      << logs({"a", "b"});

  // ddprun status: the re-formed round of one, and the lost node.
  const CommandResult table =
      ddprunOnH0({"status", "--rdzv-endpoint", endpoint(), "--rdzv-id", "netns-job"});
  ASSERT_EQ(table.code, 0) << table.output;
  std::cout << "[ status   ]\n" << table.output << std::flush;
  const CommandResult answer =
      ddprunOnH0({"status", "--rdzv-endpoint", endpoint(), "--rdzv-id", "netns-job", "--json"});
  ASSERT_EQ(answer.code, 0) << answer.output;
  const status::JobStatus job = status::decodeJobStatus(answer.output);
  EXPECT_EQ(job.state, status::JobState::kRunning) << answer.output;
  EXPECT_GE(job.round, 1) << answer.output;
  EXPECT_EQ(job.world_size, 2) << answer.output;
  ASSERT_EQ(job.members.size(), 1u) << answer.output;
  EXPECT_EQ(job.members[0].node_rank, 0) << answer.output;
  ASSERT_FALSE(job.losses.empty()) << answer.output;
  EXPECT_EQ(job.losses[0].reason, status::LossReason::kConnectionClosed) << answer.output;
  EXPECT_TRUE(job.losses[0].was_member) << answer.output;
  EXPECT_NE(job.losses[0].agent, job.members[0].agent) << answer.output;

  // Prometheus: the daemon's loss, and the survivor's workers restarted in
  // the new round (a restart the lost node caused, not a failure). Asked of
  // what Prometheus scraped at any time: the survivor may finish its epochs
  // and exit before these queries, and an instant query finds nothing of a
  // target once it is gone (its series are marked stale).
  const std::string at_survivor = "{instance=\"" + survivor_target + "\"";
  const auto scraped = [&](const std::string& selector) {
    return value("max_over_time(" + selector + "[5m])");
  };
  const std::string lost_series = "ddprund_agents_lost_total{reason=\"disconnected\"}";
  const std::string restart_series =
      "ddprun_group_stops_total" + at_survivor + ",reason=\"round_over\"}";
  const std::string round_series = "ddprun_rounds_joined_total" + at_survivor + "}";
  ASSERT_TRUE(test_support::eventually(
      [&] {
        return scraped(lost_series) >= 1 && scraped(restart_series) >= 1 &&
               scraped(round_series) >= 2;
      },
      30s, 200ms))
      << "lost " << scraped(lost_series) << ", stops " << scraped(restart_series) << ", rounds "
      << scraped(round_series) << "; the survivor "
      << (survivor_agent.tryWait() ? "has exited" : "still runs") << "\n"
      << series("up") << series("count by (__name__) ({job=\"ddprun\"})")
      << series("ddprun_rounds_joined_total") << series("ddprun_group_stops_total")
      << prometheus->logTail();
  std::cout << "[ metrics  ]\n"
            << series("ddprund_agents_lost_total") << series("ddprun_rounds_joined_total")
            << series("ddprun_group_stops_total{reason=\"round_over\"}") << std::flush;

  const auto done = survivor_agent.waitFor(240s);
  ASSERT_TRUE(done && done->success()) << describe(done) << logs({"a", "b"});
  EXPECT_EQ(snapshotEpochs(), kEpochs);

  // ddprun timeline: the victim's file first (pid 1), the survivor's second.
  const fs::path merged = dir_.path() / "job-timeline.json";
  const CommandResult merge =
      runCommand({DDPRUN_BINARY, "timeline", "-o", merged.string(),
                  (dirOf(victim) / "logs").string(), (dirOf(survivor) / "logs").string()});
  ASSERT_EQ(merge.code, 0) << merge.output;
  const std::string text = readFile(merged);
  const auto check = test_support::checkTrace(text);
  EXPECT_TRUE(check.problems.empty()) << check.problems.front();
  const auto all = traceEvents(text);
  const auto cut = named(all, "timeline ends: the agent was killed or is still running", 1);
  ASSERT_EQ(cut.size(), 1u) << "the killed node's file is cut short: " << merge.output;
  // What its rank 0 reported until the kill, though its agent never folded
  // it in: at least the two snapshots seen before the kill, the last of
  // them where the node's timeline ends.
  const auto snapshots = named(all, "snapshot", 1);
  ASSERT_GE(snapshots.size(), 2u) << merge.output;
  EXPECT_LE(snapshots.back()["ts"].get<double>(), cut[0]["ts"].get<double>());
  const auto stops = named(all, "stop workers", 2);
  ASSERT_FALSE(stops.empty()) << text;
  EXPECT_EQ(stops.front()["args"]["reason"], "round over");
  // On the daemon's clock the kill comes first, then the survivor's stop.
  EXPECT_LE(cut[0]["ts"].get<double>(), stops.front()["ts"].get<double>());
  int rounds = 0;
  for (const json& event : all) {
    const std::string name = event.value("name", "");
    rounds += event.value("pid", -1) == 2 && event["ph"] == "B" && name.rfind("round ", 0) == 0;
  }
  EXPECT_GE(rounds, 2) << "the survivor's first round and its recovery";
}

}  // namespace
}  // namespace ddprun::netns_test

// A real Prometheus server (Debian's prometheus) scraping a running job: a
// ddprund and two ddprun agents with --metrics-port 0, on loopback, one of
// whose workers fail once so the group restarts. Prometheus is asked,
// through its HTTP API, about the job: the restart, the agents alive, the
// attempt every node is on. And an agent hosting the rendezvous shows its
// embedded daemon's metrics on its own endpoint.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <fstream>
#include <map>
#include <optional>
#include <regex>

#include "ddprun/launcher/process/subprocess.hpp"
#include "ddprun/test_support/daemon_process.hpp"
#include "ddprun/test_support/eventually.hpp"
#include "ddprun/test_support/files.hpp"
#include "ddprun/test_support/http_get.hpp"
#include "ddprun/test_support/prometheus.hpp"
#include "ddprun/test_support/text.hpp"
#include "elastic_fixture.hpp"

namespace ddprun::launcher {
namespace {

using namespace std::chrono_literals;
using test_support::eventually;
using test_support::PrometheusSample;
using test_support::PrometheusServer;

class DdprunMetricsTest : public testing::ElasticTest {
 protected:
  // The port the agent's log says its metrics listen on.
  std::uint16_t metricsPort(const std::string& name) {
    static const std::regex line(R"(serving metrics on http://\S+:(\d+)/metrics)");
    std::smatch match;
    std::optional<std::uint16_t> port;
    if (eventually(
            [&] {
              const std::string now = log(name);
              if (!std::regex_search(now, match, line)) {
                return false;
              }
              port = static_cast<std::uint16_t>(std::stoi(match[1]));
              return true;
            },
            30s)) {
      return *port;
    }
    ADD_FAILURE() << name << " never said where its metrics are:\n" << log(name);
    return 0;
  }

  // Waits (up to 60 s) until `expr` evaluates to exactly `count` samples
  // that all satisfy `check`; the last answer, for the failure message.
  bool answers(const PrometheusServer& prometheus, const std::string& expr, std::size_t count,
               const std::function<bool(const PrometheusSample&)>& check,
               std::vector<PrometheusSample>& last) {
    return eventually(
        [&] {
          last = prometheus.query(expr);
          return last.size() == count && std::all_of(last.begin(), last.end(), check);
        },
        60s, 200ms);
  }

  static std::string describe(const std::vector<PrometheusSample>& samples) {
    std::string text;
    for (const PrometheusSample& sample : samples) {
      text += "{";
      for (const auto& [name, value] : sample.labels) {
        text += name + "=" + value + " ";
      }
      text += "} " + std::to_string(sample.value) + "\n";
    }
    return text.empty() ? "(none)" : text;
  }
};

TEST_F(DdprunMetricsTest, PrometheusScrapesARunningJobAndItsRestart) {
  const std::string daemon_port_file = (dir_.path() / "ddprund-metrics-port").string();
  test_support::DaemonProcess daemon(
      {"--host", "127.0.0.1", "--metrics-port", "0", "--metrics-port-file", daemon_port_file});
  ASSERT_TRUE(
      eventually([&] { return test_support::readFile(daemon_port_file).ends_with("\n"); }, 10s));
  const std::string daemon_metrics =
      "127.0.0.1:" + std::to_string(std::stoi(test_support::readFile(daemon_port_file)));

  // Attempt 0: a's workers exit 3 (a failure, restarted: --max-restarts 1).
  // Attempt 1: every worker waits for the release file, so the job runs
  // while Prometheus scrapes it; each --after waits up to 30 s, so four
  // give a loaded machine two minutes.
  const std::string release = (dir_.path() / "release").string();
  std::vector<std::string> wait_for_release;
  for (int i = 0; i < 4; ++i) {
    wait_for_release.insert(wait_for_release.end(), {"--after", release});
  }
  std::vector<std::string> fail_first = {"--exit-if-attempt", "0", "3"};
  fail_first.insert(fail_first.end(), wait_for_release.begin(), wait_for_release.end());
  const std::vector<std::string> launcher = {"--max-restarts", "1", "--metrics-port", "0"};
  Subprocess a = agent("a", "2", daemon.port(), fail_first, launcher);
  Subprocess b = agent("b", "2", daemon.port(), wait_for_release, launcher);
  const std::string a_metrics = "127.0.0.1:" + std::to_string(metricsPort("a"));
  const std::string b_metrics = "127.0.0.1:" + std::to_string(metricsPort("b"));

  PrometheusServer prometheus({{"ddprund", {daemon_metrics}}, {"ddprun", {a_metrics, b_metrics}}});
  std::vector<PrometheusSample> last;
  const auto positive = [](const PrometheusSample& s) { return s.value > 0; };
  const auto one = [](const PrometheusSample& s) { return s.value == 1; };

  EXPECT_TRUE(answers(prometheus, "up == 1", 3, one, last))
      << describe(last) << prometheus.logTail();
  // The restart, on the node whose workers failed.
  EXPECT_TRUE(answers(prometheus, "ddprun_restarts_total > 0", 1, one, last))
      << describe(last) << log("a");
  EXPECT_EQ(last.empty() ? "" : last[0].labels["instance"], a_metrics) << describe(last);
  // One or both of a's workers: the second may be stopped before it fails.
  EXPECT_TRUE(answers(prometheus, "ddprun_worker_failures_total{instance=\"" + a_metrics + "\"}", 1,
                      positive, last))
      << describe(last);
  // Both nodes on attempt 1, with both workers running.
  EXPECT_TRUE(answers(prometheus, "ddprun_attempt", 2, one, last)) << describe(last);
  EXPECT_TRUE(
      answers(prometheus, "ddprun_local_workers{state=\"running\"} == 2", 2, positive, last))
      << describe(last);
  // The daemon's view of the job: both agents alive, at least two rounds.
  EXPECT_TRUE(answers(
      prometheus, "ddprund_agents_alive{run_id=\"job7\"}", 1,
      [](const PrometheusSample& s) { return s.value == 2; }, last))
      << describe(last);
  EXPECT_TRUE(answers(prometheus, "ddprund_rounds_decided_total >= 2", 1, positive, last))
      << describe(last);

  std::ofstream(release) << "go\n";
  EXPECT_TRUE(a.wait().success()) << log("a");
  EXPECT_TRUE(b.wait().success()) << log("b");
}

// With no ddprund, the agent at the endpoint hosts the rendezvous: its own
// endpoint shows that daemon's families too; the other agent's does not.
TEST_F(DdprunMetricsTest, TheAgentHostingTheRendezvousShowsItsDaemonsMetrics) {
  const std::uint16_t endpoint = test_support::freeLoopbackPort();
  const std::string release = (dir_.path() / "release").string();
  const std::vector<std::string> launcher = {"--metrics-port", "0"};
  Subprocess a = agent("a", "2", endpoint, {"--after", release}, launcher);
  Subprocess b = agent("b", "2", endpoint, {"--after", release}, launcher);
  std::map<std::string, std::optional<double>> alive;
  for (const std::string name : {"a", "b"}) {
    const std::uint16_t port = metricsPort(name);
    ASSERT_TRUE(eventually([&] { return ready(name); }, 30s)) << log(name);
    const std::string text = test_support::httpGet(port, "/metrics").body;
    alive[name] = test_support::seriesValue(text, "ddprund_agents_alive{run_id=\"job7\"}");
    EXPECT_EQ(test_support::seriesValue(text, "ddprun_attempt"), 0) << text;
  }
  const bool a_hosts = test_support::contains(log("a"), "hosting the rendezvous");
  const std::string host = a_hosts ? "a" : "b";
  const std::string other = a_hosts ? "b" : "a";
  EXPECT_EQ(alive[host], 2) << log(host);
  EXPECT_EQ(alive[other], std::nullopt) << log(other);
  std::ofstream(release) << "go\n";
  EXPECT_TRUE(a.wait().success()) << log("a");
  EXPECT_TRUE(b.wait().success()) << log("b");
}

// torchrun's TORCHELASTIC_HEALTH_CHECK_PORT: the agent's /healthz answers
// there while the job runs, with no --metrics-port given.
TEST_F(DdprunMetricsTest, TheHealthCheckPortServesHealthzWhileTheJobRuns) {
  const std::uint16_t health = test_support::freeLoopbackPort();
  const std::string release = (dir_.path() / "release").string();
  Subprocess a = launch("a",
                        {"--standalone", "--nproc-per-node", "2", "--no-python", DDPRUN_FAKE_WORKER,
                         "--ready-to", (dir_.path() / "a").string(), "--after", release},
                        {{"TORCHELASTIC_HEALTH_CHECK_PORT", std::to_string(health)}});
  EXPECT_EQ(metricsPort("a"), health) << log("a");
  ASSERT_TRUE(eventually([&] { return ready("a"); }, 30s)) << log("a");
  const auto answer = test_support::httpGet(health, "/healthz");
  EXPECT_EQ(answer.status, 200u) << answer.body;
  EXPECT_EQ(answer.body, "ok");
  std::ofstream(release) << "go\n";
  EXPECT_TRUE(a.wait().success()) << log("a");
}

// The test needs a real Prometheus: without one it fails, naming the package.
TEST(PrometheusServerTest, AMissingPrometheusFailsNamingThePackage) {
  ::setenv("DDPRUN_PROMETHEUS", "/nonexistent/prometheus", 1);
  try {
    PrometheusServer prometheus({});
    ADD_FAILURE() << "a server started without a prometheus binary";
  } catch (const std::runtime_error& error) {
    EXPECT_TRUE(test_support::contains(error.what(), "installs the prometheus package"))
        << error.what();
  }
  ::unsetenv("DDPRUN_PROMETHEUS");
}

}  // namespace
}  // namespace ddprun::launcher

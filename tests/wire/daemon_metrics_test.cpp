// ddprund --metrics-port, through the real binary: clients of each dialect
// move the counters by exactly what they sent, promtool accepts the scrape
// (hostile run ids in its labels too, shown escaped), /healthz answers,
// other paths are 404, a garbage request is answered 400, a POST 405 at once,
// and the endpoint goes on serving; the flags' mistakes are one line.
#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "ddprun/metrics/exposition.hpp"
#include "ddprun/proto/rendezvous_protocol.hpp"
#include "ddprun/test_support/command.hpp"
#include "ddprun/test_support/daemon_process.hpp"
#include "ddprun/test_support/eventually.hpp"
#include "ddprun/test_support/files.hpp"
#include "ddprun/test_support/http_get.hpp"
#include "ddprun/test_support/prometheus.hpp"
#include "ddprun/test_support/temp_dir.hpp"
#include "ddprun/test_support/text.hpp"
#include "wire_client.hpp"

namespace ddprun::wire_test {
namespace {

using namespace std::chrono_literals;
using test_support::DaemonProcess;
using test_support::eventually;
using test_support::httpGet;
using test_support::seriesValue;
namespace protocol = proto::rendezvous;

class DaemonMetricsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string port_file = (dir_ / "metrics-port").string();
    daemon_.emplace(std::vector<std::string>{"--host", "127.0.0.1", "--metrics-port", "0",
                                             "--metrics-port-file", port_file});
    ASSERT_TRUE(eventually([&] { return test_support::readFile(port_file).ends_with("\n"); }, 10s))
        << daemon_->stderrText();
    metrics_port_ = static_cast<std::uint16_t>(std::stoi(test_support::readFile(port_file)));
  }

  std::string scrape() {
    const auto answer = httpGet(metrics_port_, "/metrics");
    EXPECT_EQ(answer.status, 200u);
    EXPECT_EQ(answer.content_type, metrics::kContentType);
    return answer.body;
  }

  // The series' value now; -1 (and a failure) when the scrape lacks it.
  double value(const std::string& series) {
    const std::string text = scrape();
    const auto found = seriesValue(text, series);
    EXPECT_TRUE(found.has_value()) << series << " missing from:\n" << text;
    return found.value_or(-1);
  }

  test_support::TempDir dir_{"ddprun-daemon-metrics"};
  std::optional<DaemonProcess> daemon_;
  std::uint16_t metrics_port_ = 0;
};

TEST_F(DaemonMetricsTest, ItListensOnAPortOfItsOwnAndSaysWhere) {
  EXPECT_NE(metrics_port_, daemon_->port());
  EXPECT_TRUE(test_support::contains(
      daemon_->stderrText(),
      "serving metrics on http://127.0.0.1:" + std::to_string(metrics_port_) + "/metrics"))
      << daemon_->stderrText();
}

// A 1.13 client and a 2.2+ client, each request counted once under its
// command; the latency histogram counts every request; keys and bytes held
// and the waiting client are the store's own.
TEST_F(DaemonMetricsTest, EachDialectsRequestsMoveTheCountersByExactlyWhatWasSent) {
  WireClient old(daemon_->port(), Dialect::Legacy113);
  old.set("/a", "1");
  ASSERT_EQ(old.add("/n", 2), 2);
  ASSERT_EQ(old.get("/a"), "1");                        // WAIT, then GET
  WireClient modern(daemon_->port(), Dialect::Modern);  // VALIDATE
  modern.set("/bb", "22");
  ASSERT_EQ(modern.get("/bb"), "22");
  modern.raw().sendAll(pingRequest(9));
  ASSERT_EQ(modern.raw().recvExact(4, kReplyTimeout), u32Reply(9));

  EXPECT_EQ(value("ddprund_connections{dialect=\"1.13/2.0\"}"), 1);
  EXPECT_EQ(value("ddprund_connections{dialect=\"2.2+\"}"), 1);
  EXPECT_EQ(value("ddprund_connections{dialect=\"undecided\"}"), 0);
  EXPECT_EQ(value("ddprund_connections_opened_total"), 2);
  EXPECT_EQ(value("ddprund_requests_total{command=\"validate\"}"), 1);
  EXPECT_EQ(value("ddprund_requests_total{command=\"set\"}"), 2);
  EXPECT_EQ(value("ddprund_requests_total{command=\"add\"}"), 1);
  EXPECT_EQ(value("ddprund_requests_total{command=\"wait\"}"), 2);
  EXPECT_EQ(value("ddprund_requests_total{command=\"get\"}"), 2);
  EXPECT_EQ(value("ddprund_requests_total{command=\"ping\"}"), 1);
  EXPECT_EQ(value("ddprund_requests_total{command=\"check\"}"), 0);
  EXPECT_EQ(value("ddprund_request_duration_seconds_count"), 9);
  EXPECT_EQ(value("ddprund_request_duration_seconds_bucket{le=\"+Inf\"}"), 9);
  EXPECT_EQ(value("ddprund_keys"), 3);
  EXPECT_EQ(value("ddprund_stored_bytes"), (2 + 1) + (2 + 1) + (3 + 2));  // "/a"=1 "/n"=2 "/bb"=22

  // A connection that has sent nothing has no dialect yet; a WAIT for a
  // key nobody sets is a waiting client.
  test_support::RawConnection idle(daemon_->port());
  test_support::RawConnection waiter(daemon_->port());
  waiter.sendAll(encode(Dialect::Legacy113, Command::Wait, {"/never"}));
  EXPECT_TRUE(eventually([&] { return value("ddprund_waiting_clients") == 1; }, 5s));
  EXPECT_EQ(value("ddprund_connections{dialect=\"undecided\"}"), 1);
  EXPECT_EQ(value("ddprund_connections{dialect=\"1.13/2.0\"}"), 2);

  // Clients that close between requests leave the gauge, counted as such.
  old.raw().close();
  modern.raw().close();
  EXPECT_TRUE(eventually(
      [&] { return value("ddprund_connections_closed_total{reason=\"peer_closed\"}") == 2; }, 5s));
  EXPECT_EQ(value("ddprund_connections{dialect=\"2.2+\"}"), 0);
  EXPECT_EQ(value("ddprund_connections{dialect=\"1.13/2.0\"}"), 1);
}

// promtool checks the format and Prometheus' naming rules (units, _total).
TEST_F(DaemonMetricsTest, PromtoolAcceptsTheScrape) {
  WireClient client(daemon_->port(), Dialect::Modern);
  ASSERT_TRUE(client.roundTrip());
  const std::string text = scrape();
  const test_support::CommandResult check = test_support::promtoolCheckMetrics(text);
  EXPECT_EQ(check.code, 0) << check.output << "\n---\n" << text;
  EXPECT_EQ(check.output, "") << text;
}

TEST_F(DaemonMetricsTest, HealthzIsOkAndOtherPathsAreNotFound) {
  const auto health = httpGet(metrics_port_, "/healthz");
  EXPECT_EQ(health.status, 200u);
  EXPECT_EQ(health.body, "ok");
  EXPECT_EQ(httpGet(metrics_port_, "/").status, 404u);
  EXPECT_EQ(httpGet(metrics_port_, "/metricsx").status, 404u);
  EXPECT_EQ(httpGet(metrics_port_, "/metrics?format=text").status, 200u);
}

// Bytes that are no HTTP request get a 400 and a closed connection; the
// endpoint and the store go on.
TEST_F(DaemonMetricsTest, AGarbageRequestIsAnswered400AndNothingElseIsDisturbed) {
  test_support::RawConnection garbage(metrics_port_);
  garbage.sendAll(std::string("\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03 garbage\r\n\r\n", 24));
  ASSERT_TRUE(garbage.waitForClose(5s));
  EXPECT_TRUE(garbage.buffered().starts_with("HTTP/1.1 400 Bad Request")) << garbage.buffered();
  EXPECT_EQ(httpGet(metrics_port_, "/healthz").status, 200u);
  WireClient client(daemon_->port(), Dialect::Legacy113);
  EXPECT_TRUE(client.roundTrip());
  EXPECT_EQ(daemon_->exitedStatus(), std::nullopt);
}

// A run id is an agent's bytes. In a label it is shown by ddprun's rule for
// text from outside: no byte a terminal running curl would obey (C0, DEL,
// C1, a bidi override), no invalid UTF-8, and promtool still accepts it.
TEST_F(DaemonMetricsTest, AHostileRunIdIsEscapedInItsLabelsAndPromtoolAcceptsTheScrape) {
  const std::string run_id = std::string("evil\0\x1b[2J\r\x07", 11) + "\xe2\x80\xae\xc2\x9b\xff";
  protocol::JoinRequest join;
  join.agent = "node0:1";
  join.min_nodes = 2;
  join.max_nodes = 2;
  join.last_call_timeout = 30s;
  join.keep_alive_timeout = 30s;
  join.store_host = "node0";
  join.store_port = 1;
  WireClient agent(daemon_->port(), Dialect::Modern);
  agent.set(protocol::verbKey(run_id, protocol::Verb::kJoin), protocol::encodeJoin(join));
  ASSERT_TRUE(agent.roundTrip()) << daemon_->stderrText();
  const std::string text = scrape();
  EXPECT_TRUE(test_support::contains(
      text, R"(ddprund_agents_alive{run_id="evil\\x00\\x1b[2J\\x0d\\x07\\u202e\\u009b\\xff"} 1)"))
      << text;
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    ASSERT_FALSE((byte < 0x20 && c != '\n') || byte == 0x7f) << "byte " << int{byte} << "\n"
                                                             << text;
  }
  EXPECT_FALSE(test_support::contains(text, "\xe2\x80\xae")) << text;
  EXPECT_FALSE(test_support::contains(text, "\xc2\x9b")) << text;
  const test_support::CommandResult check = test_support::promtoolCheckMetrics(text);
  EXPECT_EQ(check.code, 0) << check.output << "\n---\n" << text;
  EXPECT_EQ(check.output, "") << text;
}

// The endpoint's HTTP, through the binary (the shared class has the full
// suite): a POST announcing content it never sends is answered 405 at once
// and closed; a folded header line is 400.
TEST_F(DaemonMetricsTest, APostIs405AtOnceAndAFoldedHeaderIs400) {
  test_support::RawConnection post(metrics_port_);
  post.sendAll("POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n");
  ASSERT_TRUE(post.waitForClose(3s)) << "no answer before the 10 s deadline: " << post.buffered();
  EXPECT_TRUE(post.buffered().starts_with("HTTP/1.1 405 Method Not Allowed\r\n"))
      << post.buffered();
  EXPECT_TRUE(test_support::contains(post.buffered(), "\r\nAllow: GET, HEAD\r\n"))
      << post.buffered();
  test_support::RawConnection folded(metrics_port_);
  folded.sendAll("GET /metrics HTTP/1.1\r\nHost: x\r\nX-A: a\r\n b\r\n\r\n");
  ASSERT_TRUE(folded.waitForClose(3s)) << folded.buffered();
  EXPECT_TRUE(folded.buffered().starts_with("HTTP/1.1 400 Bad Request\r\n")) << folded.buffered();
  EXPECT_EQ(httpGet(metrics_port_, "/healthz").status, 200u);
}

class DaemonMetricsFlagsTest : public ::testing::Test {
 protected:
  test_support::CommandResult run(const std::vector<std::string>& args) {
    return DaemonProcess::runToEnd(args);
  }
};

TEST_F(DaemonMetricsFlagsTest, TheStoresPortIsRefusedForTheMetrics) {
  const auto outcome = run({"--port", "29411", "--metrics-port", "29411"});
  EXPECT_EQ(outcome.status.describe(), "exited with code 2") << outcome.errors;
  EXPECT_EQ(outcome.errors,
            "ddprund: --metrics-port 29411: the store's port (--port); the metrics need a port of "
            "their own\n");
}

TEST_F(DaemonMetricsFlagsTest, AMetricsHostOrPortFileWithoutAPortIsRefused) {
  const auto host = run({"--port", "0", "--metrics-host", "127.0.0.1"});
  EXPECT_EQ(host.status.describe(), "exited with code 2") << host.errors;
  EXPECT_EQ(host.errors, "ddprund: --metrics-host needs --metrics-port\n");
  const auto file = run({"--port", "0", "--metrics-port-file", "/tmp/x"});
  EXPECT_EQ(file.errors, "ddprund: --metrics-port-file needs --metrics-port\n");
}

TEST_F(DaemonMetricsFlagsTest, AMetricsHostThatIsNotAnAddressIsOneLineAndExitTwo) {
  const auto outcome = run({"--port", "0", "--metrics-port", "0", "--metrics-host", "nowhere"});
  EXPECT_EQ(outcome.status.describe(), "exited with code 2") << outcome.errors;
  EXPECT_EQ(outcome.errors, "ddprund: --metrics-host 'nowhere' is not an IP address\n");
}

TEST_F(DaemonMetricsFlagsTest, AMetricsPortAlreadyTakenIsOneLineAndExitOne) {
  DaemonProcess first;
  const std::string taken = std::to_string(first.port());
  const auto outcome = run({"--host", "127.0.0.1", "--port", "0", "--metrics-port", taken});
  EXPECT_EQ(outcome.status.describe(), "exited with code 1") << outcome.errors;
  EXPECT_EQ(outcome.errors,
            "ddprund: metrics: cannot listen (127.0.0.1:" + taken + ": Address already in use)\n");
}

}  // namespace
}  // namespace ddprun::wire_test

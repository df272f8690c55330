// A store server in-process (1 and 2 I/O threads) behind its metrics
// endpoint: each way a client's connection ends is counted under its own
// reason, a 2.1 client under its dialect; and the endpoint's own limits and
// HTTP: a method other than GET or HEAD, content, obsolete line folding,
// Expect: 100-continue, HEAD, a header too large, an idle client, a flood of
// connections, stopping with clients connected; /healthz's 503 with the
// owner's reason.
#include "ddprun/rendezvous/metrics_endpoint.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "ddprun/metrics/registry.hpp"
#include "ddprun/rendezvous/server.hpp"
#include "ddprun/test_support/eventually.hpp"
#include "ddprun/test_support/http_get.hpp"
#include "ddprun/test_support/prometheus.hpp"
#include "wire_client.hpp"

namespace ddprun::rdzv {
namespace {

using namespace std::chrono_literals;
using proto::Command;
using proto::Dialect;
using test_support::eventually;
using test_support::httpGet;
using test_support::RawConnection;
using wire_test::WireClient;

class MetricsEndpointTest : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override { start(Dialect::Legacy113); }

  void start(Dialect legacy) {
    endpoint_.reset();
    server_.reset();
    ServerOptions options;
    options.host = "127.0.0.1";
    options.port = 0;
    options.threads = GetParam();
    options.legacy_dialect = legacy;
    options.request_timeout = 300ms;
    server_.emplace(options);
    registry_ = metrics::Registry();
    registry_.add([this](metrics::Exposition& out) { server_->collectMetrics(out); });
    endpoint_.emplace(MetricsEndpointOptions{"127.0.0.1", 0, {}}, registry_);
    server_->start();
    endpoint_->start();
  }

  // Straight from the server, without HTTP: also once it has stopped.
  double value(const std::string& series) {
    metrics::Exposition out;
    server_->collectMetrics(out);
    const auto found = test_support::seriesValue(out.text(), series);
    EXPECT_TRUE(found.has_value()) << series << " missing from:\n" << out.text();
    return found.value_or(-1);
  }

  bool becomes(const std::string& series, double expected) {
    return eventually([&] { return value(series) == expected; }, 5s);
  }

  std::uint16_t port() const { return server_->port(); }

  metrics::Registry registry_;
  std::optional<Server> server_;
  std::optional<MetricsEndpoint> endpoint_;
};

TEST_P(MetricsEndpointTest, EveryWayAConnectionEndsIsCountedUnderItsReason) {
  // A command byte 1.13 does not have: a bad request.
  RawConnection bad(port());
  bad.sendAll(std::string(1, '\x7f'));
  ASSERT_TRUE(bad.waitForClose(5s));
  EXPECT_TRUE(becomes("ddprund_connections_closed_total{reason=\"bad_request\"}", 1));

  // Half an ADD, then nothing for longer than --request-timeout.
  RawConnection slow(port());
  slow.sendAll(std::string("\x03\x05\x00", 3));
  ASSERT_TRUE(slow.waitForClose(5s));
  EXPECT_TRUE(becomes("ddprund_connections_closed_total{reason=\"request_timeout\"}", 1));

  // Half an ADD, then the client goes away.
  RawConnection vanishing(port());
  vanishing.sendAll(std::string("\x03\x05\x00", 3));
  vanishing.close();
  EXPECT_TRUE(becomes("ddprund_connections_closed_total{reason=\"peer_lost\"}", 1));

  // Between requests: a clean close.
  {
    WireClient polite(port(), Dialect::Legacy113);
    polite.set("/big", std::string(1 << 20, 'v'));
    ASSERT_TRUE(polite.roundTrip());
  }
  EXPECT_TRUE(becomes("ddprund_connections_closed_total{reason=\"peer_closed\"}", 1));

  // 64 MiB of replies asked for and none read: past 16 MiB queued the
  // server stops reading it, and closes it after --request-timeout.
  RawConnection hoarder(port());
  std::string requests;
  for (int i = 0; i < 64; ++i) {
    requests += wire_test::encode(Dialect::Legacy113, Command::Get, {"/big"});
  }
  ASSERT_TRUE(hoarder.sendAll(requests));
  EXPECT_TRUE(becomes("ddprund_connections_closed_total{reason=\"not_reading\"}", 1));

  // Still connected when the server stops.
  WireClient left(port(), Dialect::Modern);
  ASSERT_TRUE(left.roundTrip());
  RawConnection silent(port());
  EXPECT_TRUE(becomes("ddprund_connections_opened_total", 7));
  server_->stop();
  EXPECT_EQ(value("ddprund_connections_closed_total{reason=\"shutdown\"}"), 2);
  EXPECT_EQ(value("ddprund_connections_closed_total{reason=\"peer_closed\"}"), 1);
  for (const char* dialect : {"undecided", "1.13/2.0", "2.1", "2.2+"}) {
    EXPECT_EQ(value(std::string("ddprund_connections{dialect=\"") + dialect + "\"}"), 0) << dialect;
  }
}

TEST_P(MetricsEndpointTest, A21ClientIsCountedUnderItsOwnDialect) {
  start(Dialect::Legacy21);
  WireClient client(port(), Dialect::Legacy21);
  ASSERT_EQ(client.add("/n", 4), 4);
  EXPECT_EQ(value("ddprund_connections{dialect=\"2.1\"}"), 1);
  EXPECT_EQ(value("ddprund_connections{dialect=\"1.13/2.0\"}"), 0);
  EXPECT_EQ(value("ddprund_requests_total{command=\"add\"}"), 1);
}

// Requests spread over every thread still add up: the counts are per thread.
TEST_P(MetricsEndpointTest, CountsFromEveryThreadAddUp) {
  std::vector<std::unique_ptr<WireClient>> clients;
  for (int i = 0; i < 6; ++i) {
    clients.push_back(std::make_unique<WireClient>(port(), Dialect::Legacy113));
    for (int n = 0; n < 10; ++n) {
      ASSERT_TRUE(clients.back()->add("/n", 1).has_value());
    }
  }
  EXPECT_EQ(value("ddprund_requests_total{command=\"add\"}"), 60);
  EXPECT_EQ(value("ddprund_request_duration_seconds_count"), 60);
  EXPECT_EQ(value("ddprund_connections{dialect=\"1.13/2.0\"}"), 6);
}

// What the endpoint answers `request` with before it closes the connection:
// "" when it did not close it within `within` (10 s is the request deadline,
// so an answer within 3 s is one given at once).
std::string answerThenClose(std::uint16_t port, const std::string& request,
                            std::chrono::milliseconds within = 3s) {
  RawConnection connection(port);
  connection.sendAll(request);
  return connection.waitForClose(within) ? connection.buffered() : "";
}

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// Any method but GET and HEAD, on any path, whatever content it announces
// (a body that never comes, a 100-continue expectation): 405 at once, and
// the connection closed, its content never read.
TEST_P(MetricsEndpointTest, AnyOtherMethodIsAnswered405AtOnceAndTheConnectionClosed) {
  for (const std::string request :
       {"POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n",
        "POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\nExpect: 100-continue\r\n\r\n",
        "PUT /healthz HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n",
        "DELETE /nowhere HTTP/1.1\r\nHost: x\r\n\r\n", "OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n"}) {
    const std::string answer = answerThenClose(endpoint_->port(), request);
    EXPECT_TRUE(answer.starts_with("HTTP/1.1 405 Method Not Allowed\r\n")) << request << answer;
    EXPECT_TRUE(has(answer, "\r\nAllow: GET, HEAD\r\n")) << answer;
    EXPECT_TRUE(has(answer, "\r\nConnection: close\r\n")) << answer;
    EXPECT_FALSE(has(answer, "100 Continue")) << answer;
  }
  // The body a client sends anyway does not cost it the answer.
  const std::string answer = answerThenClose(
      endpoint_->port(), "POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n" +
                             std::string(100000, 'b'));
  EXPECT_TRUE(answer.starts_with("HTTP/1.1 405")) << answer.substr(0, 100);
  EXPECT_EQ(httpGet(endpoint_->port(), "/healthz").status, 200u);
}

// Obsolete line folding (RFC 9112 §5.2), and a blank line start before the
// first field (§2.2): refused, not unfolded.
TEST_P(MetricsEndpointTest, AFoldedHeaderLineIsAnswered400) {
  for (const std::string request :
       {"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Folded: a\r\n b\r\n\r\n",
        "GET /metrics HTTP/1.1\r\nHost: x\r\nX-Folded: a\r\n\tb\r\n\r\n",
        "GET /metrics HTTP/1.1\r\n Host: x\r\n\r\n"}) {
    const std::string answer = answerThenClose(endpoint_->port(), request);
    EXPECT_TRUE(answer.starts_with("HTTP/1.1 400 Bad Request\r\n")) << request << answer;
    EXPECT_TRUE(has(answer, "obsolete line folding")) << answer;
  }
}

// A GET has no content: one that announces some is refused at once rather
// than its content awaited.
TEST_P(MetricsEndpointTest, AGetAnnouncingContentIsAnswered400AtOnce) {
  for (const std::string request :
       {"GET /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n",
        "GET /metrics HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"}) {
    const std::string answer = answerThenClose(endpoint_->port(), request);
    EXPECT_TRUE(answer.starts_with("HTTP/1.1 400 Bad Request\r\n")) << request << answer;
  }
}

// A GET expecting 100-continue is answered as any GET: it has no content to
// continue with. The connection stays open for the next request.
TEST_P(MetricsEndpointTest, AGetExpecting100ContinueIsAnsweredAsAnyGet) {
  RawConnection client(endpoint_->port());
  client.sendAll("GET /healthz HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n\r\n");
  ASSERT_TRUE(eventually(
      [&] {
        client.waitForClose(10ms);  // reads what came meanwhile
        return client.buffered().ends_with("\r\n\r\nok");
      },
      3s))
      << client.buffered();
  EXPECT_TRUE(client.buffered().starts_with("HTTP/1.1 200 OK\r\n")) << client.buffered();
  EXPECT_FALSE(client.peerClosed());
}

// HEAD gets GET's status and header, Content-Length included, and no
// content: the next response on the connection follows right after it.
TEST_P(MetricsEndpointTest, HeadGetsTheHeaderOfAGetWithoutItsContent) {
  RawConnection client(endpoint_->port());
  client.sendAll(
      "HEAD /healthz HTTP/1.1\r\nHost: x\r\n\r\nGET /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
  ASSERT_TRUE(eventually(
      [&] {
        client.waitForClose(10ms);
        return client.buffered().ends_with("\r\n\r\nok");
      },
      3s))
      << client.buffered();
  const std::string& both = client.buffered();
  const std::size_t second = both.find("HTTP/1.1", 1);
  ASSERT_NE(second, std::string::npos) << both;
  const std::string head = both.substr(0, second);
  EXPECT_TRUE(head.starts_with("HTTP/1.1 200 OK\r\n")) << both;
  EXPECT_TRUE(has(head, "\r\nContent-Length: 2\r\n")) << both;
  EXPECT_TRUE(head.ends_with("\r\n\r\n")) << both;
  const std::string metrics = answerThenClose(
      endpoint_->port(), "HEAD /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  EXPECT_TRUE(metrics.starts_with("HTTP/1.1 200 OK\r\n")) << metrics;
  EXPECT_TRUE(metrics.ends_with("\r\n\r\n")) << metrics;
}

TEST_P(MetricsEndpointTest, AHeaderTooLargeIsRefusedAndTheEndpointGoesOn) {
  RawConnection huge(endpoint_->port());
  huge.sendAll("GET /metrics HTTP/1.1\r\nX-Padding: " + std::string(20000, 'a') + "\r\n\r\n");
  ASSERT_TRUE(huge.waitForClose(5s));
  EXPECT_TRUE(huge.buffered().starts_with("HTTP/1.1 400")) << huge.buffered().substr(0, 100);
  EXPECT_EQ(httpGet(endpoint_->port(), "/metrics").status, 200u);
}

// One thread serves every client, asynchronously: a client that sends
// nothing holds nobody up.
TEST_P(MetricsEndpointTest, AnIdleClientDoesNotHoldUpAScrape) {
  RawConnection idle(endpoint_->port());
  RawConnection half(endpoint_->port());
  half.sendAll("GET /metrics HTTP/1.1\r\n");
  const auto started = std::chrono::steady_clock::now();
  EXPECT_EQ(httpGet(endpoint_->port(), "/metrics", 2s).status, 200u);
  EXPECT_LT(std::chrono::steady_clock::now() - started, 2s);
}

// Past 64 connections at once, a newcomer closes the one that has waited
// longest for a request: clients that only hold connections (silent, or
// keep-alive between rare requests) cannot lock a scraper out.
TEST_P(MetricsEndpointTest, AFloodOfSilentConnectionsLosesItsOldestToAScrape) {
  std::vector<RawConnection> flood;
  for (int i = 0; i < 64; ++i) {
    flood.emplace_back(endpoint_->port());
  }
  EXPECT_EQ(httpGet(endpoint_->port(), "/metrics", 2s).status, 200u);
  EXPECT_TRUE(flood.front().waitForClose(5s)) << "the longest idle connection is closed";
  EXPECT_EQ(flood.front().buffered(), "");
  EXPECT_FALSE(flood.back().waitForClose(100ms)) << "only one made room";
}

TEST_P(MetricsEndpointTest, KeepAliveConnectionsHeldBetweenRequestsDoNotLockOutAScrape) {
  std::vector<RawConnection> held;
  for (int i = 0; i < 64; ++i) {
    held.emplace_back(endpoint_->port());
    ASSERT_TRUE(held.back().sendAll("GET /healthz HTTP/1.1\r\nHost: h\r\n\r\n"));
  }
  for (RawConnection& connection : held) {  // each answered, and kept open
    ASSERT_TRUE(eventually(
        [&] {
          connection.waitForClose(10ms);  // reads what came meanwhile
          return connection.buffered().ends_with("\r\n\r\nok");
        },
        5s))
        << connection.buffered();
  }
  EXPECT_EQ(httpGet(endpoint_->port(), "/metrics", 2s).status, 200u);
  EXPECT_EQ(httpGet(endpoint_->port(), "/metrics", 2s).status, 200u);
}

// /healthz asks the owner's judgement each time: 503 with its reason while
// it has one, 200 "ok" again once it has none.
TEST(MetricsEndpointHealthTest, HealthzIs503WithTheReasonWhileThereIsOne) {
  metrics::Registry registry;
  std::atomic<bool> stuck{true};
  MetricsEndpoint endpoint(
      MetricsEndpointOptions{"127.0.0.1", 0,
                             [&] { return stuck ? std::string("the loop is stuck") : ""; }},
      registry);
  endpoint.start();
  const auto unhealthy = httpGet(endpoint.port(), "/healthz");
  EXPECT_EQ(unhealthy.status, 503u);
  EXPECT_EQ(unhealthy.body, "the loop is stuck\n");
  stuck = false;
  const auto healthy = httpGet(endpoint.port(), "/healthz");
  EXPECT_EQ(healthy.status, 200u);
  EXPECT_EQ(healthy.body, "ok");
}

TEST_P(MetricsEndpointTest, StoppingWithClientsConnectedReturns) {
  RawConnection idle(endpoint_->port());
  ASSERT_EQ(httpGet(endpoint_->port(), "/healthz").status, 200u);
  endpoint_->stop();
  EXPECT_TRUE(idle.waitForClose(5s));
  EXPECT_THROW(httpGet(endpoint_->port(), "/healthz", 1s), std::runtime_error);
}

INSTANTIATE_TEST_SUITE_P(Threads, MetricsEndpointTest, ::testing::Values(1, 2));

}  // namespace
}  // namespace ddprun::rdzv

// The store-scale benchmark's pieces at small counts against the ddprund of
// this build: the ADD+WAIT barrier in 1.13 and 2.x request bytes, spread over
// several source addresses, what it reports when a server never answers or
// is not there, and runStoreScale's tables end to end, with the echo floor.
#include "store_scale.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <sstream>
#include <string>

#include "barrier.hpp"
#include "connection_limits.hpp"
#include "ddprun/test_support/daemon_process.hpp"
#include "ddprun/test_support/silent_listener.hpp"

namespace ddprun::bench {
namespace {

using namespace std::chrono_literals;
using test_support::DaemonProcess;

constexpr int kConnections = 200;

BarrierOptions barrierAgainst(const DaemonProcess& daemon, BarrierBytes bytes) {
  BarrierOptions options;
  options.port = daemon.port();
  options.connections = kConnections;
  options.bytes = bytes;
  options.connect_window = 64;
  options.connect_timeout = 30s;
  options.barrier_timeout = 30s;
  options.server_pid = daemon.pid();
  return options;
}

void expectEveryClientAnswered(const BarrierResult& result) {
  EXPECT_EQ(result.error, "");
  EXPECT_EQ(result.connected, kConnections);
  EXPECT_EQ(result.released, kConnections);
  EXPECT_TRUE(result.allReleased());
  EXPECT_GT(result.total_seconds, 0.0);
  EXPECT_GE(result.total_seconds, result.barrier_seconds);
  EXPECT_GT(result.rss_before_kib, 0u);
  EXPECT_GE(result.rss_connected_kib, result.rss_before_kib);
  EXPECT_GE(result.peak_rss_kib, result.rss_connected_kib);
  // CPU time comes in clock ticks (10 ms), more than 200 connections need.
}

TEST(BarrierTest, EveryClientIsReleasedIn113Bytes) {
  DaemonProcess daemon;
  const BarrierResult result = runBarrier(barrierAgainst(daemon, BarrierBytes::Torch113));
  expectEveryClientAnswered(result);
  EXPECT_EQ(result.source_addresses, 1);
}

// The 2.x probe is VALIDATE + PING; a server that did not parse both would
// not echo the nonce, and no connection would count as connected.
TEST(BarrierTest, EveryClientIsReleasedIn2xBytes) {
  DaemonProcess daemon;
  const BarrierResult result = runBarrier(barrierAgainst(daemon, BarrierBytes::Torch2x));
  expectEveryClientAnswered(result);
}

TEST(BarrierTest, SpreadsConnectionsOverSourceAddresses) {
  DaemonProcess daemon;
  BarrierOptions options = barrierAgainst(daemon, BarrierBytes::Torch2x);
  options.source_addresses = 3;
  const BarrierResult result = runBarrier(options);
  expectEveryClientAnswered(result);
  EXPECT_EQ(result.source_addresses, 3);
}

TEST(BarrierTest, ReportsHowFarItGotWhenTheServerNeverAnswers) {
  // The kernel completes every handshake, but no probe is ever answered.
  const test_support::SilentListener listener(kConnections);
  BarrierOptions options;
  options.port = listener.port();
  options.connections = kConnections;
  options.connect_timeout = 300ms;
  const BarrierResult result = runBarrier(options);
  EXPECT_EQ(result.connected, 0);
  EXPECT_FALSE(result.allReleased());
  EXPECT_EQ(result.error, "connected 0 of 200 in 0.3 s");
}

TEST(BarrierTest, ReportsARefusedConnectInsteadOfThrowing) {
  std::uint16_t port = 0;
  {
    DaemonProcess daemon;  // a port that was just free, and is again once it stops
    port = daemon.port();
  }
  BarrierOptions options;
  options.port = port;
  options.connections = 10;
  const BarrierResult result = runBarrier(options);
  EXPECT_EQ(result.connected, 0);
  EXPECT_NE(result.error.find("Connection refused"), std::string::npos) << result.error;
}

TEST(ConnectionLimitsTest, SourceAddressesKeepEachToAQuarterOfItsPorts) {
  const int quarter = ephemeralPorts() / 4;
  EXPECT_EQ(sourceAddressesFor(1), 1);
  EXPECT_EQ(sourceAddressesFor(quarter), 1);
  EXPECT_EQ(sourceAddressesFor(quarter + 1), 2);
  EXPECT_EQ(sourceAddressesFor(4 * quarter), 4);
}

TEST(ConnectionLimitsTest, ConnectWindowNeverExceedsTheAcceptQueue) {
  EXPECT_EQ(connectWindowFor(acceptQueueLimit() + 1000), acceptQueueLimit());
  EXPECT_EQ(connectWindowFor(1), 1);
}

TEST(ConnectionLimitsTest, ConnectionsThatFitLeaveRoomForEachProcessOwnFds) {
  EXPECT_EQ(connectionsThatFit({20000, 20000, true}), 19000);
  EXPECT_EQ(connectionsThatFit({1048576, 1048576, false}), 1048000);
  EXPECT_EQ(connectionsThatFit({100, 100, false}), 0);
}

// Cells of one Markdown table line ("| a | b |" has 2).
std::size_t cellCount(const std::string& line) {
  return static_cast<std::size_t>(std::count(line.begin(), line.end(), '|')) - 1;
}

// Every row of every table has as many cells as its header.
void expectWellFormedTables(const std::string& text) {
  std::istringstream lines(text);
  std::string line;
  std::size_t header_cells = 0;
  while (std::getline(lines, line)) {
    if (line.empty() || line.front() != '|') {
      header_cells = 0;
      continue;
    }
    if (header_cells == 0) {
      header_cells = cellCount(line);
    }
    EXPECT_EQ(cellCount(line), header_cells) << line;
  }
}

// runStoreScale end to end at small counts, LibTorch's server missing: every
// table is printed, LibTorch's rows say why they were not run, and the echo
// floor answers the raw load (a reply of the wrong size would stall it).
TEST(StoreScaleTest, PrintsEveryTableWithItsTargets) {
  StoreScaleOptions options;
  options.ddprund = DaemonProcess::defaultBinary();
  options.libtorch_server = "/nonexistent/libtorch_store_server";
  options.echo_floor = DDPRUN_ECHO_FLOOR;
  options.barrier_connections = kConnections;
  options.cpu_connections = {4};
  options.warmup_s = 0.1;
  options.duration_s = 0.3;
  options.repeat = 1;
  options.growth = {50, kConnections};
  std::ostringstream out;
  runStoreScale(options, out);
  const std::string text = out.str();
  EXPECT_NE(text.find("| ddprund | 1.13 | 200 |"), std::string::npos) << text;
  EXPECT_NE(text.find("| ddprund | 2.x | 200 |"), std::string::npos) << text;
  EXPECT_NE(text.find("| libtorch | 1.13 | 200 | not run: /nonexistent/libtorch_store_server "
                      "does not exist"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("yes, 200"), std::string::npos) << text;
  EXPECT_NE(text.find("(target < 5)"), std::string::npos) << text;
  EXPECT_NE(text.find("(target < 1024)"), std::string::npos) << text;
  EXPECT_NE(text.find("(target ≤ 0.50)"), std::string::npos) << text;
  EXPECT_NE(text.find("(target ≤ 1.20)"), std::string::npos) << text;
  EXPECT_EQ(text.find("echo_floor"), std::string::npos) << text;  // no note of its failure
  EXPECT_NE(text.find("| 4 | "), std::string::npos) << text;      // the CPU-per-op row
  EXPECT_NE(text.find("| 50 | "), std::string::npos) << text;     // a growth row
  EXPECT_EQ(text.find("failed"), std::string::npos) << text;
  expectWellFormedTables(text);
}

}  // namespace
}  // namespace ddprun::bench

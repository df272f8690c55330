#include "store_big_request.hpp"

#include <array>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

#include "ddprun/proto/tcpstore_codec.hpp"
#include "ddprun/test_support/raw_connection.hpp"
#include "ddprun/test_support/temp_dir.hpp"
#include "format.hpp"
#include "servers.hpp"
#include "watchdog.hpp"

namespace ddprun::bench {
namespace {

namespace proto = ddprun::proto;
using Clock = std::chrono::steady_clock;

// A request that takes longer than this is reported as such, not waited for.
constexpr std::chrono::seconds kReplyTimeout{300};
constexpr std::uint32_t kPingNonce = 0x4f6b;

// The order matters: CHECK, WAIT and MULTI_GET find the keys MULTI_SET made.
constexpr std::array<proto::Command, 4> kCommands = {proto::Command::MultiSet,
                                                     proto::Command::Check, proto::Command::Wait,
                                                     proto::Command::MultiGet};

// 16-byte keys and 8-byte values.
struct KeySet {
  explicit KeySet(int count) {
    for (int i = 0; i < count; ++i) {
      char key[32];
      std::snprintf(key, sizeof(key), "/big/%011d", i);
      keys.emplace_back(key);
      values.emplace_back("v" + std::string(key).substr(9));
    }
  }
  std::vector<std::string> keys;
  std::vector<std::string> values;
};

// One request's bytes and the reply bytes that say it has been served.
// MULTI_SET has no reply: a PING follows it.
struct Exchange {
  std::string request;
  std::size_t reply_bytes = 0;
};

Exchange exchangeFor(proto::Command command, const KeySet& set) {
  const std::vector<std::string_view> keys(set.keys.begin(), set.keys.end());
  const std::vector<std::string_view> values(set.values.begin(), set.values.end());
  Exchange exchange;
  const bool pairs = command == proto::Command::MultiSet;
  proto::encodeRequest(proto::Dialect::Modern,
                       proto::makeRequest(command, keys, pairs ? values : decltype(values){}),
                       exchange.request);
  switch (command) {
    case proto::Command::MultiSet:
      proto::encodeRequest(proto::Dialect::Modern,
                           proto::makeRequest(proto::Command::Ping, {}, {}, 0, kPingNonce),
                           exchange.request);
      exchange.reply_bytes = sizeof(kPingNonce);
      break;
    case proto::Command::MultiGet:
      for (const std::string& value : set.values) {
        exchange.reply_bytes += sizeof(std::uint64_t) + value.size();
      }
      break;
    default:
      exchange.reply_bytes = 1;  // READY, STOP_WAITING
  }
  return exchange;
}

// Server CPU and wall time per request, in milliseconds.
struct Cost {
  double cpu_ms = 0;
  double wall_ms = 0;
};

struct Row {
  int keys = 0;
  std::size_t check_bytes = 0;
  std::array<std::optional<Cost>, kCommands.size()> costs;  // empty: not answered
  std::string error;
};

Cost measure(const Exchange& exchange, RunningServer& server, test_support::RawConnection& conn,
             int repeat) {
  const double cpu_before = server.cpuSeconds();
  const auto start = Clock::now();
  for (int i = 0; i < repeat; ++i) {
    if (!conn.sendAll(exchange.request) || !conn.recvExact(exchange.reply_bytes, kReplyTimeout)) {
      throw std::runtime_error("no reply within " + std::to_string(kReplyTimeout.count()) + " s");
    }
  }
  const std::chrono::duration<double, std::milli> wall = Clock::now() - start;
  return {(server.cpuSeconds() - cpu_before) * 1000 / repeat, wall.count() / repeat};
}

Row measureKeys(int keys, const BigRequestOptions& options, const test_support::TempDir& scratch) {
  std::cerr << "store_bench: requests of " << keys << " keys against ddprund..." << std::endl;
  Watchdog watchdog("the requests of " + std::to_string(keys) + " keys",
                    kCommands.size() * options.repeat * kReplyTimeout + std::chrono::minutes(1));
  ServerConfig config;
  config.ddprund = options.ddprund;
  config.ddprund_threads = options.ddprund_threads;
  RunningServer server(ServerKind::Ddprund, config, scratch);
  test_support::RawConnection conn(server.port());
  conn.sendAll(proto::encodeRequest(
      proto::Dialect::Modern,
      proto::makeRequest(proto::Command::Validate, {}, {}, 0, proto::kValidateMagic)));
  const KeySet set(keys);
  Row row;
  row.keys = keys;
  row.check_bytes = exchangeFor(proto::Command::Check, set).request.size();
  try {
    for (std::size_t i = 0; i < kCommands.size(); ++i) {
      row.costs[i] = measure(exchangeFor(kCommands[i], set), server, conn, options.repeat);
    }
  } catch (const std::exception& error) {
    row.error = error.what();
  }
  conn.close();
  server.stop();
  return row;
}

std::string cell(const Cost& cost) {
  return formatNumber("%.1f", cost.cpu_ms) + " ms (" + formatNumber("%.0f", cost.wall_ms) + " ms)";
}

void printTable(std::ostream& out, const std::vector<Row>& rows, int repeat) {
  out << "\nddprund's CPU for one request of many keys, sent in one write on one 2.2+ "
         "connection (16-byte keys, 8-byte values; server CPU per request, wall time in "
         "brackets; mean of "
      << repeat << "):\n\n";
  out << "| keys | CHECK's bytes | MULTI_SET | CHECK | WAIT | MULTI_GET |\n"
         "|---:|---:|---:|---:|---:|---:|\n";
  for (const Row& row : rows) {
    out << "| " << row.keys << " | "
        << formatNumber("%.2f", static_cast<double>(row.check_bytes) / (1 << 20)) << " MiB";
    for (const std::optional<Cost>& cost : row.costs) {
      out << " | " << (cost ? cell(*cost) : "–");
    }
    out << " |\n";
  }
  for (const Row& row : rows) {
    if (!row.error.empty()) {
      out << "\n- " << row.keys << " keys: " << row.error << '\n';
    }
  }
}

}  // namespace

void runBigRequests(const BigRequestOptions& options, std::ostream& out) {
  if (options.keys.empty()) {
    return;
  }
  const test_support::TempDir scratch("store_big_request");
  std::vector<Row> rows;
  for (int keys : options.keys) {
    rows.push_back(measureKeys(keys, options, scratch));
  }
  printTable(out, rows, options.repeat);
}

}  // namespace ddprun::bench

// A real Prometheus server (Debian's prometheus package) started for a test,
// and promtool's check of a scrape. PrometheusServer owns the server's
// launcher::Subprocess (its own process group, killed with the test
// process) and a TempDir with its configuration, its data and its log; the
// constructor returns once it is ready, the destructor stops it (SIGTERM,
// then SIGKILL) and removes the directory. It scrapes every target each
// second. Used by one thread, the one that constructed it.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ddprun/test_support/command.hpp"

namespace ddprun::test_support {

// One scrape job: its name (the `job` label) and its "host:port" targets,
// scraped at /metrics.
struct ScrapeJob {
  std::string name;
  std::vector<std::string> targets;
};

// One element of a query's instant vector.
struct PrometheusSample {
  std::map<std::string, std::string> labels;
  double value = 0;
};

class PrometheusServer {
 public:
  // Throws std::runtime_error naming the package when there is no
  // prometheus binary, and with the server's log when it is not ready
  // within 30 s.
  explicit PrometheusServer(std::vector<ScrapeJob> jobs);
  ~PrometheusServer();
  PrometheusServer(const PrometheusServer&) = delete;
  PrometheusServer& operator=(const PrometheusServer&) = delete;

  // PATH's prometheus, or $DDPRUN_PROMETHEUS; "" when there is none.
  static std::string binary();

  std::uint16_t port() const;
  // What `expr` evaluates to now (the HTTP API's /api/v1/query); throws
  // std::runtime_error with Prometheus' answer when it is not a vector.
  std::vector<PrometheusSample> query(const std::string& expr) const;
  // The last lines of the server's log, for a failed test's report.
  std::string logTail() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The value of one series in a scrape's text, named exactly as written
// (`ddprund_keys`, `ddprund_requests_total{command="set"}`); nullopt when the
// scrape has no such line.
std::optional<double> seriesValue(const std::string& scrape, const std::string& series);

// `promtool check metrics` on `text` (promtool reads it from its stdin).
// Throws std::runtime_error naming the package when there is no promtool.
CommandResult promtoolCheckMetrics(const std::string& text);

}  // namespace ddprun::test_support

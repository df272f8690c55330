#include "ddprun/test_support/prometheus.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <system_error>

#include "ddprun/launcher/process/executable_path.hpp"
#include "ddprun/launcher/process/subprocess.hpp"
#include "ddprun/test_support/eventually.hpp"
#include "ddprun/test_support/files.hpp"
#include "ddprun/test_support/http_get.hpp"
#include "ddprun/test_support/temp_dir.hpp"
#include "ddprun/test_support/text.hpp"

namespace ddprun::test_support {
namespace {

using Millis = std::chrono::milliseconds;

constexpr Millis kReadyLimit(30000);
// A port picked free can be taken by someone else before Prometheus binds
// it (parallel tests): it is then started again on another.
constexpr int kStartAttempts = 3;
constexpr std::size_t kLogTailBytes = 3000;

std::string pathVariable() {
  const char* path = std::getenv("PATH");
  return path != nullptr ? path : "/usr/bin:/bin";
}

// Each second, so a test sees a change within a few; the timeout may not
// exceed the interval.
std::string configuration(const std::vector<ScrapeJob>& jobs) {
  std::string yaml =
      "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n"
      "scrape_configs:\n";
  for (const ScrapeJob& job : jobs) {
    yaml += "  - job_name: '" + job.name + "'\n    static_configs:\n      - targets: [";
    for (std::size_t i = 0; i < job.targets.size(); ++i) {
      yaml += (i == 0 ? "'" : ", '") + job.targets[i] + "'";
    }
    yaml += "]\n";
  }
  return yaml;
}

}  // namespace

struct PrometheusServer::Impl {
  TempDir dir{"ddprun-prometheus"};
  std::uint16_t port = 0;
  std::optional<launcher::Subprocess> process;

  // True once ready; false when it exited (a lost port race, or worse).
  bool start(const std::string& binary) {
    port = freeLoopbackPort();
    launcher::SpawnOptions options;
    options.argv = {binary, "--config.file=" + (dir / "prometheus.yml").string(),
                    "--storage.tsdb.path=" + (dir / "data").string(),
                    "--web.listen-address=127.0.0.1:" + std::to_string(port), "--log.level=warn"};
    options.env = {{"PATH", pathVariable()}};
    const int log =
        ::open((dir / "prometheus.log").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (log < 0) {
      throw std::system_error(errno, std::generic_category(), "prometheus.log");
    }
    options.stdout_fd = options.stderr_fd = log;
    try {
      process.emplace(options);
    } catch (...) {
      ::close(log);
      throw;
    }
    ::close(log);
    bool exited = false;
    const bool ready = eventually(
        [&] {
          if (process->tryWait()) {
            exited = true;
            return true;
          }
          try {
            return httpGet(port, "/-/ready", Millis(1000)).status == 200;
          } catch (const std::runtime_error&) {
            return false;  // not listening yet
          }
        },
        kReadyLimit, Millis(50));
    if (exited) {
      process.reset();
      return false;
    }
    if (!ready) {
      throw std::runtime_error("prometheus was not ready within 30 s; its log:\n" + tail());
    }
    return true;
  }

  std::string tail() const {
    const std::string log = readFile(dir / "prometheus.log");
    return log.size() > kLogTailBytes ? log.substr(log.size() - kLogTailBytes) : log;
  }
};

PrometheusServer::PrometheusServer(std::vector<ScrapeJob> jobs) : impl_(std::make_unique<Impl>()) {
  const std::string prometheus = binary();
  if (prometheus.empty() || !launcher::isExecutableFile(prometheus)) {
    throw std::runtime_error("no prometheus binary ('" + prometheus +
                             "' from $DDPRUN_PROMETHEUS or PATH): deploy/install-deps.sh installs "
                             "the prometheus package");
  }
  std::ofstream(impl_->dir / "prometheus.yml") << configuration(jobs);
  for (int attempt = 1; attempt <= kStartAttempts; ++attempt) {
    if (impl_->start(prometheus)) {
      return;
    }
    if (!contains(impl_->tail(), "address already in use")) {
      break;
    }
  }
  throw std::runtime_error("prometheus exited before it was ready; its log:\n" + impl_->tail());
}

PrometheusServer::~PrometheusServer() {
  if (impl_->process) {
    impl_->process->stop(Millis(5000));
  }
}

std::string PrometheusServer::binary() {
  if (const char* env = std::getenv("DDPRUN_PROMETHEUS"); env != nullptr && *env != '\0') {
    return env;
  }
  return launcher::findExecutable("prometheus", pathVariable()).value_or("");
}

std::uint16_t PrometheusServer::port() const { return impl_->port; }

std::string PrometheusServer::logTail() const { return impl_->tail(); }

std::vector<PrometheusSample> PrometheusServer::query(const std::string& expr) const {
  const HttpAnswer answer = httpGet(impl_->port, "/api/v1/query?query=" + urlEncode(expr));
  const auto json = nlohmann::json::parse(answer.body, nullptr, false);
  if (answer.status != 200 || json.is_discarded() || json.value("status", "") != "success" ||
      json["data"].value("resultType", "") != "vector") {
    throw std::runtime_error("prometheus query '" + expr + "': HTTP " +
                             std::to_string(answer.status) + ": " + answer.body);
  }
  std::vector<PrometheusSample> samples;
  for (const auto& result : json["data"]["result"]) {
    PrometheusSample sample;
    for (const auto& [name, value] : result["metric"].items()) {
      sample.labels[name] = value.get<std::string>();
    }
    // [timestamp, "value"]: Prometheus sends the value as a string.
    sample.value = std::stod(result["value"][1].get<std::string>());
    samples.push_back(std::move(sample));
  }
  return samples;
}

std::optional<double> seriesValue(const std::string& scrape, const std::string& series) {
  const std::string start = series + " ";
  for (std::size_t at = 0; at < scrape.size();) {
    const std::size_t end = std::min(scrape.find('\n', at), scrape.size());
    const std::string_view line(scrape.data() + at, end - at);
    if (line.starts_with(start)) {
      return std::stod(std::string(line.substr(start.size())));
    }
    at = end + 1;
  }
  return std::nullopt;
}

CommandResult promtoolCheckMetrics(const std::string& text) {
  const auto promtool = launcher::findExecutable("promtool", pathVariable());
  if (!promtool) {
    throw std::runtime_error(
        "no promtool on PATH: deploy/install-deps.sh installs the prometheus package");
  }
  TempDir dir("ddprun-promtool");
  std::ofstream(dir / "scrape.txt") << text;
  CommandOptions options;
  options.env = {{"PATH", pathVariable()}};
  options.streams = Streams::Merged;
  // promtool reads the scrape from its stdin only.
  return runCommand({"/bin/sh", "-c", "exec \"$0\" check metrics < \"$1\"", *promtool,
                     (dir / "scrape.txt").string()},
                    options);
}

}  // namespace ddprun::test_support

// Prometheus' text exposition format, version 0.0.4, written by hand: Debian
// 12 packages no Prometheus client library for C++ (no prometheus-cpp), and
// the format is small. What it follows, from Prometheus' documentation of the
// format: one `# HELP` and one `# TYPE` line per family, then its samples,
// all together; label values escape `\`, `"` and newlines (ddprun first shows
// them by its one rule for text from outside, proto/visible_text.hpp, so
// none is left with a newline, a control byte or invalid UTF-8), help text
// `\` and newlines; a histogram is its cumulative `_bucket{le="..."}` series ending
// with `le="+Inf"`, then `_sum` and `_count`; values as Go's ParseFloat reads
// them (`+Inf`, `-Inf`, `NaN`).
//
// An Exposition is built on one thread, for one scrape, then rendered. A
// Registry holds the collectors that fill one; see registry.hpp.
#pragma once

#include <deque>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ddprun/metrics/histogram.hpp"

namespace ddprun::metrics {

enum class MetricType { kCounter, kGauge, kHistogram };

// Label name and value pairs, in the order they are written.
using Labels = std::vector<std::pair<std::string, std::string>>;

class Family {
 public:
  Family(std::string name, MetricType type, std::string help);

  // A counter's or a gauge's sample.
  void sample(double value, const Labels& labels = {});
  // A histogram's series (its labels must not name `le`).
  void histogram(const HistogramSnapshot& snapshot, const Labels& labels = {});

  const std::string& name() const { return name_; }
  MetricType type() const { return type_; }
  bool empty() const { return lines_.empty(); }
  // The family's HELP and TYPE lines and its samples.
  void render(std::string& out) const;

 private:
  std::string name_;
  MetricType type_;
  std::string help_;
  std::string lines_;  // the samples, already rendered
};

class Exposition {
 public:
  // The family `name`, created on first use. A name must match
  // [a-zA-Z_:][a-zA-Z0-9_:]*, and a family asked for again must have the same
  // type: anything else is a bug of ddprun's (DDPRUN_ASSERT).
  Family& family(std::string_view name, MetricType type, std::string_view help);

  // Every family with at least one sample, in the order first asked for.
  std::string text() const;

 private:
  std::deque<Family> families_;  // stable references
};

// The Content-Type of text() for an HTTP response.
inline constexpr std::string_view kContentType = "text/plain; version=0.0.4; charset=utf-8";

// The pieces of the format, exposed for the tests. escapeLabelValue() is
// Prometheus' escaping of proto::visible(raw).
std::string escapeLabelValue(std::string_view raw);
std::string escapeHelp(std::string_view help);
std::string formatValue(double value);
bool isValidMetricName(std::string_view name);
bool isValidLabelName(std::string_view name);

}  // namespace ddprun::metrics

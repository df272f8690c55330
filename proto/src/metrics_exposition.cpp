#include <charconv>
#include <cmath>

#include "ddprun/metrics/exposition.hpp"
#include "ddprun/proto/errors.hpp"
#include "ddprun/proto/visible_text.hpp"

namespace ddprun::metrics {
namespace {

bool isNameStart(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }

bool isDigit(char c) { return c >= '0' && c <= '9'; }

std::string_view typeName(MetricType type) {
  switch (type) {
    case MetricType::kCounter:
      return "counter";
    case MetricType::kGauge:
      return "gauge";
    case MetricType::kHistogram:
      return "histogram";
  }
  return "untyped";
}

void checkLabels(const Labels& labels) {
  for (const auto& [name, value] : labels) {
    DDPRUN_ASSERT(isValidLabelName(name), "invalid label name '" + name + "'");
  }
}

// name{a="x",b="y"} value\n; `extra` (a histogram's le) comes last.
void writeSample(std::string& out, std::string_view name, const Labels& labels,
                 const std::pair<std::string, std::string>* extra, double value) {
  out.append(name);
  if (!labels.empty() || extra != nullptr) {
    out.push_back('{');
    bool first = true;
    const auto writeLabel = [&](const std::pair<std::string, std::string>& label) {
      out.append(first ? "" : ",").append(label.first).append("=\"");
      out.append(escapeLabelValue(label.second)).append("\"");
      first = false;
    };
    for (const auto& label : labels) {
      writeLabel(label);
    }
    if (extra != nullptr) {
      writeLabel(*extra);
    }
    out.push_back('}');
  }
  out.push_back(' ');
  out.append(formatValue(value));
  out.push_back('\n');
}

}  // namespace

bool isValidMetricName(std::string_view name) {
  if (name.empty() || !(isNameStart(name[0]) || name[0] == ':')) {
    return false;
  }
  for (const char c : name) {
    if (!(isNameStart(c) || isDigit(c) || c == ':')) {
      return false;
    }
  }
  return true;
}

// Names starting with "__" are Prometheus' own.
bool isValidLabelName(std::string_view name) {
  if (name.empty() || !isNameStart(name[0]) || name.starts_with("__")) {
    return false;
  }
  for (const char c : name) {
    if (!(isNameStart(c) || isDigit(c))) {
      return false;
    }
  }
  return true;
}

// Label values come from clients (a run id is bytes of a store key), so they
// are shown by ddprun's one rule for such text (proto::visible): the scrape
// stays valid UTF-8 (one invalid byte and Prometheus rejects all of it), and
// holds no byte that a terminal running curl would obey. Then Prometheus'
// own escaping of `\` and `"`; visible() leaves no newline to escape.
std::string escapeLabelValue(std::string_view raw) {
  const std::string value = proto::visible(raw);
  std::string escaped;
  escaped.reserve(value.size());
  for (const char c : value) {
    if (c == '\\') {
      escaped += "\\\\";
    } else if (c == '"') {
      escaped += "\\\"";
    } else {
      escaped += c;
    }
  }
  return escaped;
}

std::string escapeHelp(std::string_view help) {
  std::string escaped;
  escaped.reserve(help.size());
  for (const char c : help) {
    if (c == '\\') {
      escaped += "\\\\";
    } else if (c == '\n') {
      escaped += "\\n";
    } else {
      escaped += c;
    }
  }
  return escaped;
}

// The shortest text that reads back as the same double: integers without a
// fraction ("3"), others as "0.005" or "1e-06", all of which Go parses.
std::string formatValue(double value) {
  if (std::isnan(value)) {
    return "NaN";
  }
  if (std::isinf(value)) {
    return value > 0 ? "+Inf" : "-Inf";
  }
  char buffer[32];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, value);
  return std::string(buffer, result.ptr);
}

Family::Family(std::string name, MetricType type, std::string help)
    : name_(std::move(name)), type_(type), help_(std::move(help)) {}

void Family::sample(double value, const Labels& labels) {
  DDPRUN_ASSERT(type_ != MetricType::kHistogram, "a plain sample of histogram " + name_);
  checkLabels(labels);
  writeSample(lines_, name_, labels, nullptr, value);
}

void Family::histogram(const HistogramSnapshot& snapshot, const Labels& labels) {
  DDPRUN_ASSERT(type_ == MetricType::kHistogram, "a histogram sample of " + name_);
  checkLabels(labels);
  for (const auto& label : labels) {
    DDPRUN_ASSERT(label.first != "le", "a histogram label named le in " + name_);
  }
  const std::string bucket = name_ + "_bucket";
  std::uint64_t cumulative = 0;
  for (std::size_t i = 0; i < snapshot.counts.size(); ++i) {
    cumulative += snapshot.counts[i];
    const bool last = i == snapshot.upper_bounds.size();
    const std::pair<std::string, std::string> le{
        "le", last ? "+Inf" : formatValue(snapshot.upper_bounds[i])};
    writeSample(lines_, bucket, labels, &le, static_cast<double>(cumulative));
  }
  writeSample(lines_, name_ + "_sum", labels, nullptr, snapshot.sum);
  // The +Inf bucket and _count are one number, as Prometheus requires.
  writeSample(lines_, name_ + "_count", labels, nullptr, static_cast<double>(cumulative));
}

void Family::render(std::string& out) const {
  out.append("# HELP ").append(name_).append(" ").append(escapeHelp(help_)).append("\n");
  out.append("# TYPE ").append(name_).append(" ").append(typeName(type_)).append("\n");
  out.append(lines_);
}

Family& Exposition::family(std::string_view name, MetricType type, std::string_view help) {
  for (Family& family : families_) {
    if (family.name() == name) {
      DDPRUN_ASSERT(family.type() == type, "metric " + family.name() + " asked with two types");
      return family;
    }
  }
  DDPRUN_ASSERT(isValidMetricName(name), "invalid metric name '" + std::string(name) + "'");
  return families_.emplace_back(std::string(name), type, std::string(help));
}

std::string Exposition::text() const {
  std::string out;
  for (const Family& family : families_) {
    if (!family.empty()) {
      family.render(out);
    }
  }
  return out;
}

}  // namespace ddprun::metrics

// Prometheus' text exposition format 0.0.4 as ddprun::metrics writes it,
// compared with the exact text the format's documentation prescribes.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "ddprun/metrics/exposition.hpp"
#include "ddprun/metrics/registry.hpp"

namespace ddprun::metrics {
namespace {

TEST(MetricsExposition, CounterAndGaugeFamiliesWithHelpTypeAndLabels) {
  Exposition exposition;
  exposition.family("ddprund_requests_total", MetricType::kCounter, "Requests served.")
      .sample(3, {{"command", "set"}});
  exposition.family("ddprund_keys", MetricType::kGauge, "Keys held.").sample(7);
  EXPECT_EQ(exposition.text(),
            "# HELP ddprund_requests_total Requests served.\n"
            "# TYPE ddprund_requests_total counter\n"
            "ddprund_requests_total{command=\"set\"} 3\n"
            "# HELP ddprund_keys Keys held.\n"
            "# TYPE ddprund_keys gauge\n"
            "ddprund_keys 7\n");
}

// Samples of one family stay together under its one HELP and TYPE, however
// the collectors interleave them.
TEST(MetricsExposition, SamplesOfAFamilyAskedForTwiceStayTogether) {
  Exposition exposition;
  exposition.family("a_total", MetricType::kCounter, "A.").sample(1, {{"x", "1"}});
  exposition.family("b", MetricType::kGauge, "B.").sample(2);
  exposition.family("a_total", MetricType::kCounter, "A.").sample(3, {{"x", "2"}});
  EXPECT_EQ(exposition.text(),
            "# HELP a_total A.\n# TYPE a_total counter\n"
            "a_total{x=\"1\"} 1\na_total{x=\"2\"} 3\n"
            "# HELP b B.\n# TYPE b gauge\nb 2\n");
}

TEST(MetricsExposition, AFamilyWithoutSamplesIsLeftOut) {
  Exposition exposition;
  exposition.family("ddprund_agents_alive", MetricType::kGauge, "Agents.");
  EXPECT_EQ(exposition.text(), "");
}

// A label value is shown by ddprun's one rule for text from outside
// (proto::visible: `\` doubled, a newline as \x0a), then escaped as
// Prometheus' format requires (`\` and `"`): Prometheus reads back the
// value `ddprun status` would show.
TEST(MetricsExposition, LabelValuesAreShownVisiblyThenEscapeBackslashAndQuote) {
  EXPECT_EQ(escapeLabelValue(R"(a\b"c)"
                             "\nd"),
            R"(a\\\\b\"c\\x0ad)");
  Exposition exposition;
  exposition.family("m", MetricType::kGauge, "M.")
      .sample(1, {{"path", "C:\\dir"}, {"quote", "say \"hi\""}, {"text", "two\nlines"}});
  EXPECT_EQ(exposition.text(),
            "# HELP m M.\n# TYPE m gauge\n"
            R"(m{path="C:\\\\dir",quote="say \"hi\"",text="two\\x0alines"} 1)"
            "\n");
}

// A run id is client bytes: no control byte may reach a terminal running
// curl, and the exposition must stay UTF-8 or Prometheus rejects the whole
// scrape. Valid multi-byte text is kept as it is.
TEST(MetricsExposition, LabelValuesEscapeControlsBidiOverridesAndInvalidUtf8) {
  EXPECT_EQ(escapeLabelValue(std::string("a\0b", 3)), R"(a\\x00b)");
  EXPECT_EQ(escapeLabelValue("\x1b[2J\r\x07"), R"(\\x1b[2J\\x0d\\x07)");
  EXPECT_EQ(escapeLabelValue("x\xe2\x80\xaey\xc2\x9b"), R"(x\\u202ey\\u009b)");
  EXPECT_EQ(escapeLabelValue("r\xff"), R"(r\\xff)");
  EXPECT_EQ(escapeLabelValue("a\xc3(\"b"), R"(a\\xc3(\"b)") << "a cut sequence";
  EXPECT_EQ(escapeLabelValue("caf\xC3\xA9 \xE2\x82\xAC"), "caf\xC3\xA9 \xE2\x82\xAC");
  Exposition exposition;
  exposition.family("m", MetricType::kGauge, "M.").sample(1, {{"run_id", "job\xfe\xff"}});
  EXPECT_EQ(exposition.text(),
            "# HELP m M.\n# TYPE m gauge\n"
            R"(m{run_id="job\\xfe\\xff"} 1)"
            "\n");
}

// HELP escapes backslash and newline only: a quote stays as it is.
TEST(MetricsExposition, HelpEscapesBackslashAndNewlineButNotQuotes) {
  EXPECT_EQ(escapeHelp("a \\ \"b\"\nc"), "a \\\\ \"b\"\\nc");
}

TEST(MetricsExposition, ValuesAreWrittenAsGoParsesThem) {
  EXPECT_EQ(formatValue(0), "0");
  EXPECT_EQ(formatValue(42), "42");
  EXPECT_EQ(formatValue(-3), "-3");
  EXPECT_EQ(formatValue(0.005), "0.005");
  EXPECT_EQ(formatValue(2.5e-6), "2.5e-06");
  EXPECT_EQ(formatValue(1234567890123.0), "1234567890123");
  EXPECT_EQ(formatValue(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(formatValue(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(formatValue(std::nan("")), "NaN");
}

TEST(MetricsExposition, HistogramBucketsAreCumulativeAndEndWithInfEqualToCount) {
  HistogramSnapshot snapshot;
  snapshot.upper_bounds = {0.001, 0.01, 0.1};
  snapshot.counts = {2, 0, 3, 1};  // per bucket; the last is above 0.1
  snapshot.sum = 0.75;
  Exposition exposition;
  exposition.family("ddprund_request_duration_seconds", MetricType::kHistogram, "Latency.")
      .histogram(snapshot, {{"job", "x"}});
  EXPECT_EQ(exposition.text(),
            "# HELP ddprund_request_duration_seconds Latency.\n"
            "# TYPE ddprund_request_duration_seconds histogram\n"
            "ddprund_request_duration_seconds_bucket{job=\"x\",le=\"0.001\"} 2\n"
            "ddprund_request_duration_seconds_bucket{job=\"x\",le=\"0.01\"} 2\n"
            "ddprund_request_duration_seconds_bucket{job=\"x\",le=\"0.1\"} 5\n"
            "ddprund_request_duration_seconds_bucket{job=\"x\",le=\"+Inf\"} 6\n"
            "ddprund_request_duration_seconds_sum{job=\"x\"} 0.75\n"
            "ddprund_request_duration_seconds_count{job=\"x\"} 6\n");
}

TEST(MetricsExposition, AnEmptyHistogramStillHasEveryBucket) {
  Histogram histogram(std::vector<double>{1, 2});
  Exposition exposition;
  exposition.family("h_seconds", MetricType::kHistogram, "H.").histogram(histogram.snapshot());
  EXPECT_EQ(exposition.text(),
            "# HELP h_seconds H.\n# TYPE h_seconds histogram\n"
            "h_seconds_bucket{le=\"1\"} 0\nh_seconds_bucket{le=\"2\"} 0\n"
            "h_seconds_bucket{le=\"+Inf\"} 0\nh_seconds_sum 0\nh_seconds_count 0\n");
}

TEST(MetricsExposition, NamesFollowPrometheusRules) {
  EXPECT_TRUE(isValidMetricName("ddprund_keys"));
  EXPECT_TRUE(isValidMetricName("job:rate5m"));
  EXPECT_TRUE(isValidMetricName("_x9"));
  EXPECT_FALSE(isValidMetricName(""));
  EXPECT_FALSE(isValidMetricName("9lives"));
  EXPECT_FALSE(isValidMetricName("with-dash"));
  EXPECT_FALSE(isValidMetricName("with space"));
  EXPECT_TRUE(isValidLabelName("run_id"));
  EXPECT_FALSE(isValidLabelName("__name__"));
  EXPECT_FALSE(isValidLabelName("a:b"));
  EXPECT_FALSE(isValidLabelName("1a"));
}

TEST(MetricsExpositionDeathTest, AnInvalidNameIsABugOfOurs) {
  EXPECT_DEATH(Exposition().family("bad-name", MetricType::kGauge, "x"), "invalid metric name");
  EXPECT_DEATH(Exposition().family("g", MetricType::kGauge, "x").sample(1, {{"a-b", "v"}}),
               "invalid label name");
}

TEST(MetricsExpositionDeathTest, OneNameWithTwoTypesIsABugOfOurs) {
  EXPECT_DEATH(
      {
        Exposition exposition;
        exposition.family("m", MetricType::kGauge, "x");
        exposition.family("m", MetricType::kCounter, "x");
      },
      "two types");
}

TEST(MetricsRegistry, ScrapeAsksEveryCollectorInOrderEachTime) {
  Registry registry;
  int asked = 0;
  registry.add([&](Exposition& out) {
    ++asked;
    out.family("first", MetricType::kGauge, "F.").sample(asked);
  });
  registry.add([](Exposition& out) { out.family("second", MetricType::kGauge, "S.").sample(9); });
  EXPECT_EQ(registry.scrape(),
            "# HELP first F.\n# TYPE first gauge\nfirst 1\n"
            "# HELP second S.\n# TYPE second gauge\nsecond 9\n");
  // Nothing is kept between scrapes: the value is the collector's now.
  EXPECT_EQ(registry.scrape().substr(0, 44), "# HELP first F.\n# TYPE first gauge\nfirst 2\n#");
}

TEST(MetricsRegistry, CollectorsMayShareAFamily) {
  Registry registry;
  registry.add([](Exposition& out) {
    out.family("x_total", MetricType::kCounter, "X.").sample(1, {{"by", "a"}});
  });
  registry.add([](Exposition& out) {
    out.family("x_total", MetricType::kCounter, "X.").sample(2, {{"by", "b"}});
  });
  EXPECT_EQ(
      registry.scrape(),
      "# HELP x_total X.\n# TYPE x_total counter\nx_total{by=\"a\"} 1\nx_total{by=\"b\"} 2\n");
}

}  // namespace
}  // namespace ddprun::metrics

// The single-writer counter and histogram: bucket boundaries (Prometheus'
// `le` is inclusive), per-thread snapshots summed, and a reader on another
// thread never seeing a count go back.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "ddprun/metrics/histogram.hpp"

namespace ddprun::metrics {
namespace {

TEST(MetricsHistogram, AValueOnABoundCountsInThatBucket) {
  const std::vector<double> bounds = {0.001, 0.01};
  Histogram histogram(bounds);
  histogram.observe(0.0005);
  histogram.observe(0.001);   // le="0.001" is inclusive
  histogram.observe(0.0011);  // the next bucket
  histogram.observe(5);       // above every bound
  const HistogramSnapshot snapshot = histogram.snapshot();
  EXPECT_EQ(snapshot.upper_bounds, bounds);
  EXPECT_EQ(snapshot.counts, (std::vector<std::uint64_t>{2, 1, 1}));
  EXPECT_EQ(snapshot.count(), 4u);
  EXPECT_DOUBLE_EQ(snapshot.sum, 0.0005 + 0.001 + 0.0011 + 5);
}

TEST(MetricsHistogram, PerThreadSnapshotsAddUp) {
  const std::vector<double> bounds = {1, 2};
  Histogram a(bounds);
  Histogram b(bounds);
  a.observe(0.5);
  b.observe(1.5);
  b.observe(3);
  HistogramSnapshot total;  // empty: takes the first one's buckets
  total.add(a.snapshot());
  total.add(b.snapshot());
  EXPECT_EQ(total.counts, (std::vector<std::uint64_t>{1, 1, 1}));
  EXPECT_DOUBLE_EQ(total.sum, 5.0);
}

TEST(MetricsHistogramDeathTest, SummingDifferentBucketsIsABugOfOurs) {
  HistogramSnapshot a;
  a.upper_bounds = {1};
  a.counts = {0, 0};
  HistogramSnapshot b;
  b.upper_bounds = {2};
  b.counts = {0, 0};
  EXPECT_DEATH(a.add(b), "different buckets");
}

// One thread writes, another reads meanwhile (a scrape): every read is a
// value the counter had, so it never decreases, and the last is exact.
TEST(MetricsCounter, AReaderOnAnotherThreadSeesItOnlyGrow) {
  SingleWriterCounter counter;
  constexpr std::uint64_t kAdds = 200'000;
  std::atomic<bool> done{false};
  std::thread writer([&] {
    for (std::uint64_t i = 0; i < kAdds; ++i) {
      counter.add();
    }
    done = true;
  });
  std::uint64_t last = 0;
  bool decreased = false;
  while (!done) {
    const std::uint64_t now = counter.value();
    decreased = decreased || now < last;
    last = now;
  }
  writer.join();
  EXPECT_FALSE(decreased);
  EXPECT_EQ(counter.value(), kAdds);
}

TEST(MetricsCounter, SubtractTakesAGaugeBackDown) {
  SingleWriterCounter open;
  open.add(3);
  open.subtract();
  EXPECT_EQ(open.value(), 2u);
}

}  // namespace
}  // namespace ddprun::metrics

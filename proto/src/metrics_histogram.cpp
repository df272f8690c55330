#include <algorithm>

#include "ddprun/metrics/histogram.hpp"
#include "ddprun/proto/errors.hpp"

namespace ddprun::metrics {

std::uint64_t HistogramSnapshot::count() const {
  std::uint64_t total = 0;
  for (const std::uint64_t n : counts) {
    total += n;
  }
  return total;
}

void HistogramSnapshot::add(const HistogramSnapshot& other) {
  if (counts.empty()) {
    *this = other;
    return;
  }
  DDPRUN_ASSERT(other.upper_bounds == upper_bounds, "histograms with different buckets summed");
  for (std::size_t i = 0; i < counts.size(); ++i) {
    counts[i] += other.counts[i];
  }
  sum += other.sum;
}

Histogram::Histogram(std::span<const double> upper_bounds)
    : upper_bounds_(upper_bounds.begin(), upper_bounds.end()),
      counts_(std::make_unique<std::atomic<std::uint64_t>[]>(upper_bounds.size() + 1)) {
  DDPRUN_ASSERT(std::is_sorted(upper_bounds_.begin(), upper_bounds_.end()),
                "a histogram's bounds must ascend");
}

// A linear scan: a dozen or so bounds, most observations in the first few.
void Histogram::observe(double value) {
  std::size_t bucket = 0;
  while (bucket < upper_bounds_.size() && value > upper_bounds_[bucket]) {
    ++bucket;
  }
  auto& count = counts_[bucket];
  count.store(count.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  sum_.store(sum_.load(std::memory_order_relaxed) + value, std::memory_order_relaxed);
}

HistogramSnapshot Histogram::snapshot() const {
  HistogramSnapshot snapshot;
  snapshot.upper_bounds = upper_bounds_;
  for (std::size_t i = 0; i <= upper_bounds_.size(); ++i) {
    snapshot.counts.push_back(counts_[i].load(std::memory_order_relaxed));
  }
  snapshot.sum = sum_.load(std::memory_order_relaxed);
  return snapshot;
}

}  // namespace ddprun::metrics

// The two kinds of value the metrics keep while a program runs, written by
// one thread and read by any: a counter, and a histogram with fixed buckets.
//
// Single writer: add() and observe() must only ever be called by one thread
// (a session's io_context thread, or callers holding one lock); each write is
// then a plain load and store of a relaxed atomic, which costs what a plain
// increment costs, with no locked instruction. Any thread may read at any
// time (a scrape); a reader may see an observation's bucket before its sum.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

namespace ddprun::metrics {

class SingleWriterCounter {
 public:
  void add(std::uint64_t n = 1) {
    value_.store(value_.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }
  void subtract(std::uint64_t n = 1) {
    value_.store(value_.load(std::memory_order_relaxed) - n, std::memory_order_relaxed);
  }
  std::uint64_t value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<std::uint64_t> value_{0};
};

// A histogram as read at one moment: counts per bucket, not cumulative.
struct HistogramSnapshot {
  std::vector<double> upper_bounds;   // ascending, finite; +Inf is implied
  std::vector<std::uint64_t> counts;  // upper_bounds.size() + 1: the last is above every bound
  double sum = 0;

  std::uint64_t count() const;
  // Adds `other`, which has the same bounds (per-thread histograms, summed).
  void add(const HistogramSnapshot& other);
};

class Histogram {
 public:
  // `upper_bounds`: ascending and finite (Prometheus' `le`, inclusive).
  explicit Histogram(std::span<const double> upper_bounds);

  void observe(double value);  // the single writer
  HistogramSnapshot snapshot() const;

 private:
  std::vector<double> upper_bounds_;
  std::unique_ptr<std::atomic<std::uint64_t>[]> counts_;
  std::atomic<double> sum_{0};
};

}  // namespace ddprun::metrics

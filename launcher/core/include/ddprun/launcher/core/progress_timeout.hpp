// --progress-timeout SECONDS|auto[:FLOOR] (docs/reliability-security.md,
// "Progress"): how long a worker that has reported progress may then report
// none before it is judged hung, whatever its CPU does.
//
// A number is that many seconds, always. `auto` learns it from the intervals
// between one worker's progress reports (every worker's, every attempt's):
// kAutoMultiple times the longest seen, never under the floor (FLOOR seconds,
// kAutoFloor by default). The first interval after a start or a resume
// (warm-up, compilation, a snapshot loaded) gets kFirstStepFactor times that,
// and until an interval was seen at all, kFirstStepFactor times the floor.
// A plain value; one thread.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

namespace ddprun::launcher {

class ProgressTimeout {
 public:
  using Duration = std::chrono::milliseconds;
  static constexpr int kAutoMultiple = 5;
  static constexpr int kFirstStepFactor = 10;
  static constexpr Duration kAutoFloor = std::chrono::seconds(60);

  ProgressTimeout() = default;  // off
  static ProgressTimeout fixed(Duration timeout);
  static ProgressTimeout automatic(Duration floor = kAutoFloor);

  bool enabled() const { return fixed_.count() > 0 || automatic_; }
  bool isAutomatic() const { return automatic_; }

  // An interval between two progress reports of one worker.
  void intervalSeen(Duration interval);
  // The timeout for the wait after a worker's `reports`-th report of its
  // attempt (1: after its first).
  Duration after(int reports) const;
  std::optional<Duration> longestInterval() const { return longest_; }
  // "30 s", "auto: 5 × the longest step (2.1 s), at least 60 s": what the
  // log and the report say was chosen.
  std::string describe(int reports) const;

 private:
  Duration fixed_{0};
  bool automatic_ = false;
  Duration floor_{kAutoFloor};
  std::optional<Duration> longest_;
};

// The flag's value (`what` names the flag or its PET_ variable); throws
// ConfigError, naming both, when it is none.
ProgressTimeout parseProgressTimeout(std::string_view what, std::string_view text);

}  // namespace ddprun::launcher

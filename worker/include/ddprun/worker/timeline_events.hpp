// train's own events for its agent's timeline: when DDPRUN_TIMELINE_EVENTS
// names a file (ddprun gives each worker one; docs/torchrun-contract.md
// §9.5), each event is appended to it as one JSON line, {"name": ...,
// "ts_monotonic_ns": <CLOCK_MONOTONIC>, "dur_ns": ..., ...}, which the agent
// folds into timeline.json when the worker exits. Without the variable
// (another launcher, a run by hand) nothing is written. Stateless; any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>

namespace ddprun::worker {

struct TimelineEvent {
  std::string name;
  std::chrono::steady_clock::time_point at;
  std::optional<std::chrono::nanoseconds> duration;  // a span; none: an instant
  std::map<std::string, std::int64_t> numbers;       // more fields, shown as its args
  std::map<std::string, std::string> texts;
};

// Appends `event` in one write(). Never throws: the timeline is no reason
// to stop training.
void reportTimelineEvent(const TimelineEvent& event);

// train's progress for its agent (--progress-timeout, the crash-loop rule):
// one line per step, {"name": "progress", "ts_monotonic_ns": ..., "step": N},
// appended to the file DDPRUN_PROGRESS_EVENTS names, opened once. Without
// the variable it does nothing. Never throws. Owned by the trainer; its
// thread only.
class ProgressReport {
 public:
  ProgressReport();
  ~ProgressReport();
  ProgressReport(const ProgressReport&) = delete;
  ProgressReport& operator=(const ProgressReport&) = delete;

  // Step `step` is done: one write() of one line, formatted without an
  // allocation (it runs every step).
  void stepDone(std::int64_t step) const;

 private:
  int fd_ = -1;
};

}  // namespace ddprun::worker

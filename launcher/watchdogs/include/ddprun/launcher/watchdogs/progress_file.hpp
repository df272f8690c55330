// The progress a worker reports (docs/observability.md, "Progress"): one JSON
// line per step appended to the file DDPRUN_PROGRESS_EVENTS names,
//   {"name": "progress", "ts_monotonic_ns": 123, "step": 42}
// read by the agent while the worker runs, and, from a worker that reports no
// steps, one line per snapshot saved after step N,
//   {"name": "snapshot", "ts_monotonic_ns": 123, "step": 40}
// which only the crash-loop rule reads. Other lines (other names, not
// JSON, too long or too deep) are skipped: a worker's file is not trusted.
//
// ProgressFile reads only what was appended since the last read, and at most
// the last kMaxReadBytes of it: a worker that writes faster than the agent
// looks cannot make it read without bound. One instance per worker; used on
// the agent's loop thread only (no locking).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace ddprun::launcher {

struct ProgressLine {
  std::int64_t step = 0;    // a non-negative integer
  bool snapshot = false;    // a snapshot saved after `step`, not a step done
  std::int64_t ts_ns = -1;  // its ts_monotonic_ns; -1 when it has none
};
// What a progress or snapshot line reports; nullopt for any other line.
std::optional<ProgressLine> parseProgressLine(std::string_view line);

// Splits appended bytes into lines and keeps the newest progress among them.
class ProgressLines {
 public:
  static constexpr std::size_t kMaxLineBytes = 4096;  // a longer line is no progress

  struct Seen {
    int lines = 0;                     // progress lines in this chunk
    std::optional<std::int64_t> step;  // the last of their steps
    // Their first and last ts_monotonic_ns, and the longest gap between
    // two of them in a row, when they all had one in order.
    std::int64_t first_ts_ns = -1;
    std::int64_t last_ts_ns = -1;
    std::int64_t longest_gap_ns = 0;
    // The highest step of the snapshot lines in this chunk, which count
    // for none of the above.
    std::optional<std::int64_t> snapshot_step;
  };
  Seen consume(std::string_view bytes);
  // Bytes were skipped: what is kept of a line is not its start any more.
  void skipped();

 private:
  std::string partial_;    // the last line's start, until its newline comes
  bool dropping_ = false;  // inside a line that is too long, or one cut by a skip
};

class ProgressFile {
 public:
  static constexpr std::size_t kMaxReadBytes = 64 * 1024;

  explicit ProgressFile(std::filesystem::path path) : path_(std::move(path)) {}

  // Reads what was appended since the last call. A file that is missing (the
  // worker has reported nothing yet), not a regular file or a symbolic link
  // reads as nothing; one that shrank is read again from its start.
  ProgressLines::Seen readNew();
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  off_t offset_ = 0;
  ProgressLines lines_;
};

}  // namespace ddprun::launcher

// The files a benchmark run leaves behind, read back: the numbers and
// stamps its workers write (see restart_worker.cpp) and the tail of a log.
// Stateless.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

namespace ddprun::bench {

// The first integer in a file, if it has one.
std::optional<std::int64_t> readNumber(const std::filesystem::path& path);

// A restart run's stamps (see restart_worker.cpp), in ms after the crash.
struct RestartStamps {
  std::int64_t crash_ns = 0;            // the crash stamp itself (CLOCK_MONOTONIC)
  double first_start_ms = 0.0;          // the first replacement worker entered main
  double last_start_ms = 0.0;           // the last one did
  std::optional<double> first_term_ms;  // the first survivor got SIGTERM
};

// The latest of the `nproc` workers' start stamps (CLOCK_MONOTONIC ns); empty
// if one is missing.
std::optional<std::int64_t> lastStartNs(const std::filesystem::path& dir, int nproc);

// Empty if the crash stamp or any of the `nproc` start stamps is missing.
std::optional<RestartStamps> readRestartStamps(const std::filesystem::path& dir, int nproc);

// The last `lines` lines of a text file, each indented by two spaces (to
// sit inside a Markdown list item); empty for an empty or missing file.
std::string tailOf(const std::filesystem::path& path, int lines);

}  // namespace ddprun::bench

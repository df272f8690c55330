// A worker's own events file (DDPRUN_TIMELINE_EVENTS, docs/torchrun-contract.md
// §9.5), read back by the timeline when the worker has exited: one JSON
// object a line, {"name": "snapshot", "ts_monotonic_ns": <CLOCK_MONOTONIC>,
// "dur_ns": <optional>, ...anything else, kept as the event's args}. At most
// the first MiB is read: a worker that writes more is not the timeline's
// business; only a regular file (no FIFO, no symbolic link) is read. A line
// nesting arrays and objects deeper than 62 levels is no event: it would
// make timeline.json too deep to read back (proto::kMaxJsonDepth).
// Stateless; any thread.
#pragma once

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace ddprun::launcher {

struct WorkerEvent {
  std::string name;
  std::int64_t ts_us = 0;  // the trace's microseconds of the monotonic clock
  std::optional<std::int64_t> dur_us;
  nlohmann::ordered_json args = nlohmann::ordered_json::object();
};

struct WorkerEventsRead {
  std::vector<WorkerEvent> events;
  int bad_lines = 0;  // not a JSON object with a string "name" and an integer "ts_monotonic_ns"
  std::string first_bad_line;  // "line N: <why it is no event>" of the first of them
  bool cut = false;            // the file holds more than the MiB read
  // Why the file was skipped (not a regular file, a symbolic link, cannot
  // be opened); "" when it was read or does not exist.
  std::string unreadable;
};

// The events in `file`'s first MiB (a last line the MiB cuts is dropped);
// none when it does not exist (the worker reported nothing) or is not a
// regular file (a FIFO, a link: read neither, never blocking). Called on the
// agent's loop thread, so it never waits on what the worker left there.
WorkerEventsRead readWorkerEvents(const std::filesystem::path& file);

// What of the file `read` left out, and why, for one line of a warning
// (its bad lines, the first one's reason, a cut at the MiB, or why it was
// not read at all); "" when nothing was.
std::string whatWasLeftOut(const WorkerEventsRead& read);

// One line of such a file; nullopt when it is not an event, and then `why`,
// when given, says why not.
std::optional<WorkerEvent> parseWorkerEvent(const std::string& line, std::string* why = nullptr);

// `reported` as trace events of agent `pid` on local rank `local_rank`'s
// reported track: an "X" with its duration, else a thread instant; args gain
// the worker's rank and round. What the agent writes when a worker exits, and
// what the merge adds for a worker whose agent was killed first.
std::vector<nlohmann::ordered_json> reportedTraceEvents(std::vector<WorkerEvent> reported, int pid,
                                                        int local_rank, int rank, int round);

}  // namespace ddprun::launcher

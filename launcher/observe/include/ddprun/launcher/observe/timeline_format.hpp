// The agent's timeline.json (docs/torchrun-contract.md §9.5): Chrome's trace
// event format, JSON Array Format, as Perfetto and chrome://tracing open it.
// What the writer (timeline_writer.hpp) and the merger (timeline_merge.hpp)
// agree on: the file's layout, its tracks, and the events they read back.
//
// Layout: "[" on the first line, then one event object per line, each but
// the first after a ",", and "]" on the last line once the agent has ended.
// The format lets the closing "]" be missing, for traces of a process that
// died before it could write it (the Trace Event Format document, "JSON
// Array Format"; chrome://tracing's importer, catapult's
// trace_event_importer.html, drops a trailing "," and appends the "]", and
// Perfetto's json_trace_tokenizer.cc reads the events one object at a
// time), so a SIGKILLed agent's file still opens, up to its last event.
//
// Stateless functions; any thread.
#pragma once

#include <chrono>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace ddprun::launcher::timeline {

inline constexpr std::string_view kFileName = "timeline.json";
// The workers' own events files (timelineEventsFile()), next to it.
inline constexpr std::string_view kWorkerEventsDir = "worker_events";

// One agent is one trace process (pid: the agent's); its tracks (tid):
inline constexpr int kAgentTrack = 1;       // start, clock, failures, restarts, stops, the end
inline constexpr int kRendezvousTrack = 2;  // each wait for a round: B/E "rendezvous"
inline constexpr int kRoundsTrack = 3;      // each round this node ran: B/E "round N"
// Each local rank's worker, spawn to exit (B/E "rank R"), and next to it the
// events the worker reported itself.
inline int workerTrack(int local_rank) { return 10 + 2 * local_rank; }
inline int reportedTrack(int local_rank) { return 11 + 2 * local_rank; }

// Events the merger reads back (on kAgentTrack).
// args: host, pid, run_id, wall_clock_unix_us (the wall clock at its ts).
inline constexpr std::string_view kAgentStart = "agent start";
// args: clock_offset_us (the rendezvous' clock minus this agent's),
// clock_uncertainty_us (the round trip of the sample kept), clock (whose).
// Written again whenever a later join measures anew; each holds from its
// ts on.
inline constexpr std::string_view kClockOffset = "clock offset";
// On kRendezvousTrack: the rendezvous quarantined this host. args: host,
// failures (the group failures that started there), for_s (how long).
inline constexpr std::string_view kQuarantined = "quarantined";

// Microseconds of the monotonic clock: the trace's "ts".
inline std::int64_t microseconds(std::chrono::steady_clock::time_point at) {
  return std::chrono::duration_cast<std::chrono::microseconds>(at.time_since_epoch()).count();
}

// Not a trace: the text, and why.
class TraceError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Keys keep the order they were written in (name, ph, ts, pid, tid first).
using TraceEvent = nlohmann::ordered_json;

struct TraceFile {
  std::vector<TraceEvent> events;
  bool closed = false;  // ended with its "]"; else cut short, read to its last whole event
};

// A trace's text: a JSON array of events (closed or not), or an object with
// "traceEvents". An array cut short is read line by line (the layout above)
// up to its last whole event; a last line cut mid-object is dropped. Throws
// TraceError saying why it is no trace (not JSON, nested deeper than
// proto::kMaxJsonDepth, not events, an event without name, ph, ts, pid or
// tid).
TraceFile parseTrace(std::string_view text);

// What is missing from `event` for the merger to place it ("" if nothing):
// an object with a string "name" and "ph", and numbers "ts", "pid", "tid".
std::string missingFields(const TraceEvent& event);

// One trace event: {"name", "ph", "ts", "pid", "tid"} in that order, for
// readable lines.
TraceEvent traceEvent(std::string_view name, char phase, std::int64_t ts, int pid, int tid);

}  // namespace ddprun::launcher::timeline

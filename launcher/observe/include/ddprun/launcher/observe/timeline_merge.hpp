// `ddprun timeline`'s merge: several agents' timeline.json files laid on one
// clock as one job's trace, each agent a process of its own (pid 1, 2, ...
// in the order given, named "<host>, node rank R").
//
// The clock: when every file measured its offset to the same rendezvous
// clock (its "clock offset" events name the same clock), each event is
// shifted by the offset its agent measured last before it (the first one for
// the events before that), onto the rendezvous' monotonic clock; hosts' wall
// clocks play no part. Only the agent's own track (kAgentTrack) is read for
// "agent start" and "clock offset": a worker's reported events cannot move
// it. Otherwise (an etcd rendezvous measures none, an agent ended before its
// measurement, --mixed-runs for files of different runs), every file is
// placed by the wall clock its agent read at start, and a note says so and
// why.
//
// Stateless functions; any thread.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "ddprun/launcher/observe/timeline_format.hpp"

namespace ddprun::launcher::timeline {

struct NodeTrace {
  std::string file;  // for messages
  TraceFile trace;
  int reported_late = 0;  // events added by addUnfoldedWorkerEvents()
  // One line each, from addUnfoldedWorkerEvents(): a worker's events file,
  // what of it was left out and why.
  std::vector<std::string> left_out = {};
};

struct MergedTrace {
  std::vector<TraceEvent> events;
  // One line each, for stderr: each node's shift, the clock used, a file
  // cut short, what of a worker's events file was left out.
  std::vector<std::string> notes;
};

// A file cut short (its agent was killed) lacks what its still-running
// workers reported: the agent folds a worker's events file in when the
// worker exits. This adds them, from the worker_events/ directory next to
// `node.file`, on each such worker's reported track, so the merge shows the
// last the node did before it went. Reads those files as the agent does
// (regular files only, their first MiB); does nothing to a closed trace.
void addUnfoldedWorkerEvents(NodeTrace& node);

// Files of different runs (the "run_id" of their "agent start" events
// differ: two jobs, or two standalone runs in one --log-dir) are no one
// job's trace: refused unless asked for, and then placed by the hosts' wall
// clocks (the runs' clocks need not be the same).
enum class MixedRuns { kRefuse, kMergeOnWallClocks };

class MixedRunsError : public TraceError {
 public:
  using TraceError::TraceError;
};

// Throws TraceError("<file>: <why>") for a file that is no ddprun agent's
// timeline (no "agent start" event), or one that can be placed on neither
// clock; MixedRunsError naming each file and its run when they are of
// different runs and `mixed` is kRefuse.
MergedTrace mergeTraces(const std::vector<NodeTrace>& nodes, MixedRuns mixed = MixedRuns::kRefuse);

// The JSON Array Format, closed: "[", one event a line, "]".
std::string formatTrace(const std::vector<TraceEvent>& events);

}  // namespace ddprun::launcher::timeline

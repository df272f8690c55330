// `ddprun timeline [-o FILE] DIR...`: merges the timeline.json of several
// agents (nodes) into one job timeline (timeline_merge.hpp), written to FILE
// or stdout. Each DIR is a timeline.json, a run directory holding one, or a
// log directory (--log-dir) whose run directories hold them (each is one
// node). Exit status: 0 merged; 1 an input that is missing or no agent's
// timeline (one line naming it and why), or an output that cannot be
// written; 2 bad flags. Runs on main's thread.
#pragma once

#include <string>
#include <vector>

namespace ddprun::launcher {

int runTimelineCommand(const std::vector<std::string>& args);

}  // namespace ddprun::launcher

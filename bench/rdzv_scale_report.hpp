// rdzv_scale's output: the line each N ends with, then the Markdown table of
// every N, each figure against its target, and the setup. Stateless.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "rdzv_scale_runs.hpp"

namespace ddprun::bench {

// agents=N join_to_round_ms=X recovery_ms=Y daemon_rss_mib=Z daemon_cpu_s=W
// done_to_finished_ms=V tool_cpu_s=T
void printResultLine(std::ostream& out, const ScaleResult& result);

// The table, the targets met or not (≤ 10 ms at 128 agents, ≤ 100 ms at
// 1,000, ≤ 1 s at 10,000 for the round and the recovery; ddprund's peak RSS
// ≤ 100 MB at 10,000), and the setup with the machine before and after.
void printScaleReport(std::ostream& out, const std::vector<ScaleResult>& results,
                      const ScaleOptions& options, const std::string& machine_before);

}  // namespace ddprun::bench

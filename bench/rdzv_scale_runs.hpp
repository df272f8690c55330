// rdzv_scale's measurement: N simulated agents (agent_swarm.hpp) through one
// job on a fresh ddprund per N (see rdzv_scale.cpp for what each figure
// times), and the report: one line per N as it ends, then the table and
// each figure against its target.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace ddprun::bench {

struct ScaleOptions {
  std::vector<int> agents{128, 1000, 10000};
  int local_world_size = 1;
  double keep_alive_interval_s = 0;  // 0: ddprun's default (5 s)
  int keep_alive_max_attempt = 0;    // 0: ddprun's default (3)
  // Long, so that the first round completes at max_nodes, never at the last
  // call after the first N-1 joins (min_nodes is N-1, for the recovery).
  double last_call_timeout_s = 300;
  int connect_window = 1024;
  int source_addresses = 0;  // 0: as many as the connections need
  // Seconds the job runs between its first round and the loss, heartbeats
  // flowing (negative: one keep-alive interval).
  double hold_s = -1;
  std::optional<int> victim_rank;  // the group rank lost; default N/2
  double phase_timeout_s = 600;    // each phase's deadline
  std::string ddprund;
  int ddprund_threads = 1;
};

// One N's figures. Times in ms are from a request's write to the moment the
// last agent concerned held its answer.
struct ScaleResult {
  int agents = 0;  // run
  // Asked for, when more than this machine's descriptor limit holds (then
  // `agents` is the most it holds and fd_limit says why); else agents.
  int asked = 0;
  std::uint64_t fd_limit = 0;
  int source_addresses = 1;
  int victim_rank = 0;
  double connect_s = 0;  // every connection open and handshaken
  double joins_s = 0;    // N-1 joins sent and acted on
  double dones_s = 0;    // N-2 dones sent and acted on
  // The last join -> every agent holds its round.
  double join_to_round_ms = 0;
  // CPU spent meanwhile by ddprund and by this process (10 ms ticks).
  double round_daemon_cpu_ms = 0;
  double round_tool_cpu_ms = 0;
  // A member's connections closed -> every survivor holds the new round.
  double recovery_ms = 0;
  // The last done -> every survivor holds finished.
  double done_to_finished_ms = 0;
  double daemon_cpu_s = 0;    // ddprund's user + system CPU over the whole run
  double daemon_rss_mib = 0;  // ddprund's peak resident set (VmHWM)
  double tool_cpu_s = 0;      // this process's CPU over the run
  double other_cores = 0;     // other processes' CPU meanwhile, in cores
  int heartbeats = 0;         // sent over the whole run
  int hold_beats = 0;         // sent while the job held
  // ddprund's CPU while the job held, per heartbeat; nullopt when it used
  // too little to measure (under 0.1 s)
  std::optional<double> daemon_us_per_beat;
};

// One job of `agents` agents against its own ddprund. Throws
// std::runtime_error with one line when the run fails (ddprund died, a phase
// ran past its deadline, an agent was told something wrong).
ScaleResult runScale(int agents, const ScaleOptions& options);

// Raises the fd limit, runs every N of options.agents (progress on stderr),
// and prints each result line, then the tables. An N the limit cannot hold
// runs with the most agents it holds, said in its line and the tables.
// Throws as runScale does.
void runRdzvScale(const ScaleOptions& options, std::ostream& out);

}  // namespace ddprun::bench

// `ddprun --hostfile FILE ...`: one command that starts and supervises a job
// on every host of a hostfile (docs/multihost.md). This process hosts the
// job's c10d rendezvous (unless --rdzv-endpoint names one elsewhere), starts
// one ddprun agent per host (host_plan.hpp: over ssh, or as a child for
// localhost), shows every agent's output with a "HOST: " prefix, and ends
// with the job's status: the first failure's, as one node's agent does.
//
// Stopping: a first SIGINT, SIGTERM or SIGHUP stops every agent (a remote
// one sees its ssh session's stdin end: --stdin-hangup) and waits for them
// for the shutdown timeout; a second, or the timeout, SIGKILLs what is left
// here. Killed itself (even by SIGKILL), this process takes its children
// with it (their death signal) and every remote agent sees its session end.
//
// Owns the rendezvous server (its own thread), the agents' processes and
// their pipes; everything else runs on the calling thread.
#pragma once

#include <string>
#include <vector>

#include "ddprun/launcher/core/environment.hpp"
#include "ddprun/launcher/core/launch_config.hpp"
#include "ddprun/launcher/multihost/host_plan.hpp"

namespace ddprun::launcher {

// The job a --hostfile launch runs, from the parsed flags and this
// process's environment (`names`: the variables it holds). Throws
// ConfigError for the hostfile, the selection, and the flags --hostfile
// sets itself (--nproc-per-node, --node-rank, --master-*, --standalone,
// another --rdzv-backend than c10d).
MultihostJob multihostJob(const LaunchConfig& config, const Environment& env,
                          const std::vector<std::string>& names);

// Whether this process hosts the job's rendezvous (no --rdzv-endpoint given).
bool hostsRendezvous(const LaunchConfig& config);

// --dry-run's plan: one JSON object.
std::string multihostPlanJson(const LaunchConfig& config, const MultihostJob& job);

// Runs the job to its end; the exit status ddprun returns. A rendezvous
// hosted here gets its port now, in `job`'s endpoint.
int runMultihost(const LaunchConfig& config, MultihostJob job);

}  // namespace ddprun::launcher

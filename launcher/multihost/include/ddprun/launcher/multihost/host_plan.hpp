// What a multi-host launch (--hostfile) starts on each host: ddprun itself,
// told the job's shape and where the agents meet, run in the launching
// shell's working directory with the variables a job needs, over ssh, or
// directly on a host named localhost. The plan is data: --dry-run prints it,
// MultihostLaunch spawns it. Pure functions; any thread.
#pragma once

#include <set>
#include <string>
#include <utility>
#include <vector>

#include "ddprun/launcher/core/environment.hpp"
#include "ddprun/launcher/multihost/hostfile.hpp"

namespace ddprun::launcher {

struct MultihostJob {
  std::vector<SelectedHost> hosts;  // the hostfile's, after --include/--exclude
  std::vector<int> all_slots;       // each host's slot count in the hostfile, in `hosts` order
  std::string nnodes;               // "N" (the hosts), or the MIN:MAX given
  std::string rdzv_endpoint;        // where the agents meet: HOST:PORT
  std::string rdzv_id;
  // The user's options the agents get as they are (option_args less those
  // the launch sets), then the script and its arguments.
  std::vector<std::string> agent_options;
  std::vector<std::string> program;
  std::string working_dir;
  // What the agents' environment gets, in order; `secret` names those whose
  // values are never shown (read from .ddprun_env).
  std::vector<std::pair<std::string, std::string>> exported;
  std::set<std::string> secret;
  std::vector<std::string> ssh_command;  // CMD: argv = CMD HOST COMMAND
  std::string local_ddprun;              // what a localhost agent runs: this executable
};

struct HostAgent {
  std::string host;
  std::vector<int> slots;
  bool over_ssh = true;           // false: a localhost agent, started as a child here
  std::vector<std::string> argv;  // what the launching process spawns
  // A localhost agent's own environment additions (an ssh agent's are in its
  // command line).
  std::vector<std::pair<std::string, std::string>> env;
  // The command line as one shell line, with secret values masked: what
  // --dry-run and the launch's log show.
  std::string shown;
};

std::vector<HostAgent> planHostAgents(const MultihostJob& job);

// The variables of `env` an agent on another host needs: NCCL_*, GLOO_*,
// PYTHON*, CUDA_* (but CUDA_VISIBLE_DEVICES, which the selection sets),
// TORCH_*, PET_* (ddprun's own settings), PATH, LD_LIBRARY_PATH, VIRTUAL_ENV,
// CONDA_PREFIX, LOGLEVEL; then
// the KEY=VALUE lines of `home`/.ddprun_env and `working_dir`/.ddprun_env
// (the latter wins), which go into `secret`. `names` lists what `env` holds.
std::vector<std::pair<std::string, std::string>> exportedVariables(
    const std::vector<std::string>& names, const Environment& env, const std::string& home,
    const std::string& working_dir, std::set<std::string>& secret);

// `word` quoted for a POSIX shell: as it is when it needs no quoting, else
// in single quotes.
std::string shellQuoted(const std::string& word);

}  // namespace ddprun::launcher

// Slurm awareness (docs/torchrun-contract.md §3.12): started by srun, with no
// rendezvous chosen by the user, ddprun derives the launch from the step's
// environment: the node count, a c10d rendezvous at the step's first host on
// a port derived from the job and step ids, a run id from the same ids, this
// node's rank, and the workers per node. Every value the user gave (a flag or
// its PET_ variable) wins over the derived one.
//
// srun sets SLURM_STEP_NODELIST for the tasks of a step; sbatch's batch
// script has only the job's SLURM_JOB_NODELIST. So a step node list is what
// tells "started by srun" apart: a ddprun run straight from the batch script
// would otherwise wait for agents on the other nodes that nobody starts.
//
// Pure functions of an Environment (never the process's own); safe on any thread.
#pragma once

#include <optional>
#include <string>

#include "ddprun/launcher/core/environment.hpp"
#include "ddprun/launcher/core/launch_config.hpp"
#include "ddprun/proto/errors.hpp"

namespace ddprun::launcher {

// A refusal caused by Slurm's environment rather than by a flag: one line
// naming the variable and why; the caller prints no usage after it. Exit 2.
class SlurmError : public ConfigError {
 public:
  using ConfigError::ConfigError;
};

// The derived rendezvous port: kSlurmPortBase + (job id + kSlurmStepStride x
// step id) % kSlurmPortSpan, 20000 to 29999 (docs/slurm.md). Below Linux's
// ephemeral ports (32768 and up by default), so no outgoing connection holds
// it. Step 0 has the job's own port (20000 + job id % 10000); the stride, the
// span over the golden ratio, puts a job's next steps far from its own and
// its neighbours' ports: steps 0 to 7 of jobs whose ids differ by less than
// 900 never share one. No derivation into 10000 ports avoids every clash (ids
// that differ by a multiple of 10000 do): a clash is caught instead, since
// an agent-hosted rendezvous serves its own run only and refuses another
// run's join in one line (c10d_rendezvous.hpp).
inline constexpr int kSlurmPortBase = 20000;
inline constexpr int kSlurmPortSpan = 10000;
inline constexpr int kSlurmStepStride = 6180;

// What srun told this task about its step, each count with the variable it
// was read from.
struct SlurmStep {
  std::string job_id;     // SLURM_JOB_ID, digits
  std::string step_id;    // SLURM_STEP_ID; empty when unset
  std::string node_list;  // SLURM_STEP_NODELIST
  std::string first_host;
  int nodes = 0;  // SLURM_STEP_NUM_NODES, else SLURM_NNODES, else SLURM_JOB_NUM_NODES, else counted
  std::string nodes_variable;
  std::optional<int> node_id;       // SLURM_NODEID
  std::optional<int> gpus_on_node;  // SLURM_GPUS_ON_NODE when above 0
  int port = 0;

  // "slurm-<job id>.<step id>", or "slurm-<job id>" without a step id.
  std::string runId() const;
};

// The step this ddprun runs in: nullopt unless SLURM_JOB_ID and
// SLURM_STEP_NODELIST are both set. A value that is set but wrong (a job id
// that is no number, a bad hostlist) throws SlurmError naming the variable.
std::optional<SlurmStep> readSlurmStep(const Environment& env);

// ddprun starts every worker of its node itself, so a step running several
// ddprun tasks on one node (SLURM_STEP_TASKS_PER_NODE above 1, or more tasks
// than nodes) would start them all several times over: SlurmError, saying to
// use srun --ntasks-per-node=1.
void requireOneTaskPerNode(const SlurmStep& step, const Environment& env);

// Applies the Slurm rules to a parsed config, before torchrun's derived
// rules: under srun (readSlurmStep), unless --no-slurm or the user chose the
// rendezvous (--standalone, --rdzv-backend, --rdzv-endpoint, --master-addr,
// --master-port or their PET_ variables), fills in every value the user did
// not give and records it in config.sources as "slurm:<VARIABLE>". Outside
// srun, a Slurm job of several nodes gets a warning that ddprun runs on this
// node only. Throws SlurmError.
void applySlurmRules(LaunchConfig& config, const Environment& env);

// The info line for a launch derived from Slurm, e.g. "Slurm job 1234 step 0:
// 2 nodes (SLURM_STEP_NUM_NODES), node rank 0 (SLURM_NODEID), c10d rendezvous
// at gpu001:21234 (first host of SLURM_STEP_NODELIST; port from SLURM_JOB_ID and
// SLURM_STEP_ID),
// run id slurm-1234.0, 4 workers per node (SLURM_GPUS_ON_NODE)". Each value
// names where it came from, a flag included. `nproc` is the resolved worker
// count; `gpus_visible` whether a GPU was counted (for kGpusElseDefault).
std::string describeSlurmLaunch(const LaunchConfig& config, int nproc, bool gpus_visible);

}  // namespace ddprun::launcher

// The environment srun gives the task on the second node of a two-node step
// with four GPUs per node: shared by the Slurm derivation's unit tests and
// the ddprun binary's.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace ddprun::launcher::testing {

inline std::vector<std::pair<std::string, std::string>> srunStepVariables() {
  return {{"SLURM_JOB_ID", "1234"},
          {"SLURM_STEP_ID", "0"},
          {"SLURM_JOB_NODELIST", "gpu[001-002]"},
          {"SLURM_STEP_NODELIST", "gpu[001-002]"},
          {"SLURM_JOB_NUM_NODES", "2"},
          {"SLURM_NNODES", "2"},
          {"SLURM_STEP_NUM_NODES", "2"},
          {"SLURM_NODEID", "1"},
          {"SLURM_NTASKS", "2"},
          {"SLURM_STEP_NUM_TASKS", "2"},
          {"SLURM_STEP_TASKS_PER_NODE", "1(x2)"},
          {"SLURM_GPUS_ON_NODE", "4"}};
}

}  // namespace ddprun::launcher::testing

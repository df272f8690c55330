// What Kubernetes' training operators write into a pod that torchrun
// misreads, read as the operator meant it (docs/kubernetes.md). Kubeflow
// Trainer v2's torch plugin writes only what torchrun reads; the PyTorchJob
// operator (Kubeflow's training-operator v1) has written three things
// torchrun cannot use:
//   - PET_STANDALONE set and empty, for `elasticPolicy.standalone: true`:
//     torchrun reads a flag's variable as an integer and fails on "".
//     ddprun takes it as --standalone.
//   - PET_N_PROC_PER_NODE, its elastic spelling before v1.7: torchrun reads
//     only PET_NPROC_PER_NODE. ddprun takes it where PET_NPROC_PER_NODE is unset.
//   - MASTER_ADDR and MASTER_PORT without PET_MASTER_ADDR and
//     PET_MASTER_PORT (before v1.7): torchrun's static job of several nodes
//     then meets at 127.0.0.1:29500, each pod alone. ddprun meets at the
//     master's service the operator named.
// Each rule that applies adds one line to LaunchConfig::warnings saying so.
// Pure functions of the environment and the configuration.
#pragma once

#include "ddprun/launcher/core/environment.hpp"
#include "ddprun/launcher/core/launch_config.hpp"

namespace ddprun::launcher {

// `env`, answering PET_STANDALONE and PET_NPROC_PER_NODE as torchrun would
// have read the operator's values. The command line is parsed against it.
Environment withOperatorSpellings(Environment env);

// After parsing against withOperatorSpellings(env): the lines that say which
// operator value was read how, and the sources relabelled to the variables
// the operator really wrote.
void noteOperatorSpellings(LaunchConfig& config, const Environment& env);

// A static job of several nodes with no --rdzv-endpoint, --master-addr or
// PET_MASTER_ADDR meets at MASTER_ADDR (and MASTER_PORT, when neither
// --master-port nor PET_MASTER_PORT is given). Before the endpoint is derived.
void applyOperatorMaster(LaunchConfig& config, const Environment& env);

}  // namespace ddprun::launcher

// The pure-configuration rules of docs/torchrun-contract.md §3, applied once after parsing.
#pragma once

#include "ddprun/launcher/config/cli.hpp"

namespace ddprun::launcher {

// In torchrun's order: option conflicts, the Slurm rules (ddprun's own,
// docs/torchrun-contract.md §3.12), a Kubernetes operator's MASTER_ADDR
// (operator_env.hpp), --standalone, the single-node
// auto-port rule, the static endpoint and rendezvous config, endpoint
// parsing, the env-only fallbacks, then the warnings. Throws ConfigError.
void applyDerivedRules(LaunchConfig& config, const Environment& env,
                       const RunIdGenerator& make_run_id);

}  // namespace ddprun::launcher

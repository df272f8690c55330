// What this node runs, settled once before it joins: how many workers
// (--nproc-per-node resolved on this machine) and, for a Python script, the
// interpreter and the version of its torch. Stateless free functions, on
// main's thread; each may start a short-lived child (the GPU count, the
// interpreter probe).
#pragma once

#include <optional>
#include <string>

#include "ddprun/launcher/config/python_interpreter.hpp"
#include "ddprun/launcher/core/environment.hpp"
#include "ddprun/launcher/core/launch_config.hpp"

namespace ddprun::launcher {

// torchrun's rules: gpu = the visible CUDA devices (ConfigError if none),
// cpu = the CPU count, auto = GPUs if there are any, else CPUs; under Slurm
// without SLURM_GPUS_ON_NODE, GPUs if there are any, else torchrun's 1.
int resolveNproc(const NprocPerNode& nproc);

struct WorkersPython {
  std::string path;  // empty: the workers are not run by Python
  std::optional<TorchVersion> torch;
};

// The interpreter of Python workers (empty path for other workers), chosen
// once, before any node joins; its torch's version, when it can be read.
WorkersPython workersPython(const LaunchConfig& config, const Environment& env);

}  // namespace ddprun::launcher

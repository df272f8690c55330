#include "ddprun/launcher/app/node_workers.hpp"

#include <algorithm>
#include <thread>

#include "ddprun/launcher/config/worker_command.hpp"
#include "ddprun/launcher/core/log.hpp"
#include "ddprun/launcher/host/device_count.hpp"
#include "ddprun/proto/errors.hpp"

namespace ddprun::launcher {

int resolveNproc(const NprocPerNode& nproc) {
  using Kind = NprocPerNode::Kind;
  const int cpus = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  switch (nproc.kind) {
    case Kind::kCount:
      return nproc.count;
    case Kind::kCpu:
      return cpus;
    case Kind::kGpu: {
      const GpuCount gpus = countVisibleGpus();
      if (gpus.count == 0) {
        throw ConfigError("--nproc-per-node gpu: no CUDA GPU is visible: " + gpus.why_none);
      }
      log().info("--nproc-per-node gpu: {} GPU(s) visible, counted by {}", gpus.count,
                 gpus.counted_by);
      return gpus.count;
    }
    case Kind::kAuto: {
      const GpuCount gpus = countVisibleGpus();
      if (gpus.counted_by.empty()) {  // the count itself failed, not "no GPU"
        log().warn("--nproc-per-node auto: {}; using the {} CPUs", gpus.why_none, cpus);
      }
      return gpus.count > 0 ? gpus.count : cpus;
    }
    case Kind::kGpusElseDefault:
      return std::max(1, countVisibleGpus().count);
  }
  DDPRUN_ASSERT(false, "a --nproc-per-node kind without a count");
  return 1;
}

// The interpreter of Python workers, chosen once, before any node joins: a
// Python without torch would fail every worker of every attempt. Its torch's
// version decides which NCCL variable the workers get; for $PYTHON_EXEC it
// is asked only of a real interpreter (the answer is then kept), never of a
// script.
WorkersPython workersPython(const LaunchConfig& config, const Environment& env) {
  if (!runsUnderPython(config, env)) {
    return {};
  }
  const TorchProbeOptions probe = agentProbeOptions();
  std::optional<std::string> origin;
  const PythonChoice choice = choosePython(env, [&probe, &origin](const std::string& python) {
    origin = torchOrigin(python, probe);
    return origin.has_value();
  });
  if (!origin && isCacheableInterpreter(choice.path)) {
    origin = torchOrigin(choice.path, probe);
  }
  const auto torch = origin ? torchVersionAt(*origin) : std::nullopt;
  if (!choice.why.empty()) {
    log().info("workers' Python: {} ({})", choice.path, choice.why);
  } else {
    log().debug("workers' Python: {}, torch {}", choice.path,
                torch ? fmt::format("{}.{}", torch->major, torch->minor) : "of unknown version");
  }
  return {choice.path, torch};
}

}  // namespace ddprun::launcher

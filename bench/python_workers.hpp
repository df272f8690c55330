// The Python side of launch_bench: finding the interpreter that has torch
// (the first python3 on PATH may not), and the Python workers it runs.
#pragma once

#include <filesystem>
#include <string>

namespace ddprun::bench {

struct TorchPython {
  std::string python;         // empty when none was found
  std::string torch_version;  // empty when `python` cannot import torch
};

// `requested` if given (its torch version, if any), else the first python3 or
// python on PATH that can import torch. `scratch` receives probe output.
TorchPython findTorchPython(const std::string& requested, const std::filesystem::path& scratch);

struct WorkerScripts {
  std::filesystem::path noop;     // `import sys`: the cheapest Python worker
  std::filesystem::path restart;  // restart_worker's `restart` mode, in Python
};

WorkerScripts writeWorkerScripts(const std::filesystem::path& dir);

}  // namespace ddprun::bench

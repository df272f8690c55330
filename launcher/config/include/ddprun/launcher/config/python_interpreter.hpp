// Which Python runs the script workers (docs/torchrun-contract.md §4).
// torchrun runs them with its own interpreter, the one that has torch;
// ddprun has none, so it chooses one, once per agent, before any worker
// starts. Stateless free functions; choosePython looks at the filesystem and
// asks its probe, findsTorch starts one short-lived Python unless its
// answer is kept (torch_probe_cache.hpp).
#pragma once

#include <chrono>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>

#include "ddprun/launcher/config/torch_probe_cache.hpp"
#include "ddprun/launcher/core/environment.hpp"

namespace ddprun::launcher {

struct PythonChoice {
  std::string path;
  // Why this one, when it is not the first python3 on PATH (the agent says
  // so in one line); empty when it is, or when $PYTHON_EXEC named it.
  std::string why;
};

// Whether `python` can import torch; asked of the python3 on PATH only.
using TorchProbe = std::function<bool(const std::string& python)>;

// In order: $PYTHON_EXEC as given (torchrun's override); the active virtual
// environment's $VIRTUAL_ENV/bin/python, then the conda environment's
// $CONDA_PREFIX/bin/python, when it is an executable file; else the first
// python3 on $PATH that `finds_torch` (a pyenv shim or a system Python
// without torch is passed by). Throws ConfigError naming every interpreter
// tried when none fits.
PythonChoice choosePython(const Environment& env, const TorchProbe& finds_torch);

struct TorchProbeOptions {
  std::chrono::milliseconds deadline{10000};  // then the probe is killed: "not found"
  ProbeEnv env;                               // the probe's whole environment
  // Where answers are kept between agents (TorchProbeCache); none: always ask.
  std::optional<std::filesystem::path> cache_file;
};

// The agent's own: its environment (the workers' PYTHONPATH), the default
// cache file (defaultProbeCacheFile), 10 s.
TorchProbeOptions agentProbeOptions();

// Asks `python` whether it finds torch on its path: importlib's find_spec,
// which reads no more than directory entries; torch itself is never
// imported. A kept answer that is still valid is used without starting
// Python. Its output goes nowhere; false if it fails, cannot start, or is
// not done within the deadline (then it is killed).
bool findsTorch(const std::string& python, const TorchProbeOptions& options);
// The same question; the answer is where: torch's __init__.py ("" for a
// torch without one), nullopt when not found.
std::optional<std::string> torchOrigin(const std::string& python, const TorchProbeOptions& options);

struct TorchVersion {
  int major = 0;
  int minor = 0;
  bool operator==(const TorchVersion&) const = default;
  bool atLeast(int want_major, int want_minor) const {
    return major > want_major || (major == want_major && minor >= want_minor);
  }
};
// The version of the torch whose __init__.py is `origin`, from its
// version.py beside it (read, never imported); nullopt when it says none.
std::optional<TorchVersion> torchVersionAt(const std::string& origin);

}  // namespace ddprun::launcher

// The interpreter probe's positive answers, kept in a file between agents
// (docs/torchrun-contract.md §4): asking a Python whether it finds torch
// costs one interpreter start (20–30 ms, a quarter of a 4-worker launch), and
// its answer changes only when a file it read changes. An answer is kept
// with a stamp (device, inode, modification time, size) of every file and
// directory that decided it: the interpreter, its pyvenv.cfg, torch's
// __init__.py, every sys.path entry and the .pth and sitecustomize files in
// them. It is used only while every stamp still matches, for the same
// interpreter path, host and Python variables (PYTHONPATH, HOME, ...).
//
// Only answers of real interpreters (ELF programs, or links to them) are
// kept: a script such as a pyenv shim chooses its Python from files and
// variables nothing here can stamp. Only "found" answers are kept: "not
// found" could turn true through a directory that did not exist when it was
// asked (a user site created by `pip install --user torch`).
//
// Stateless apart from the file; any thread. Two agents writing at once each
// replace the file whole (a rename), so one of their answers is kept.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ddprun/launcher/core/environment.hpp"

namespace ddprun::launcher {

using ProbeEnv = std::vector<std::pair<std::string, std::string>>;

// What one probe saw: torch's __init__.py (empty when torch was not found,
// or was a namespace package with no file) and the interpreter's sys.path.
struct TorchProbeAnswer {
  bool found = false;
  std::string torch_origin;
  std::vector<std::string> sys_path;
};

class TorchProbeCache {
 public:
  explicit TorchProbeCache(std::filesystem::path file) : file_(std::move(file)) {}

  // torch's __init__.py when an answer for `python` under `env` is kept and
  // every stamp still matches; nullopt when there is none, it is stale, or
  // the file cannot be read.
  std::optional<std::string> keptTorchOrigin(const std::string& python, const ProbeEnv& env) const;

  // Keeps a "found" answer (nothing for any other, nor one read from a file
  // changed in the last 2 s, whose next change might not move its mtime); a
  // cache file that cannot be written is left as it was.
  void remember(const std::string& python, const ProbeEnv& env,
                const TorchProbeAnswer& answer) const;

  const std::filesystem::path& file() const { return file_; }

 private:
  std::filesystem::path file_;
};

// Whether an answer about `python` may be kept: it is an ELF program (after
// links), not a script.
bool isCacheableInterpreter(const std::string& python);

// $XDG_CACHE_HOME/ddprun/python-probes.json, else ~/.cache/ddprun/...;
// nullopt when neither variable is set or DDPRUN_PYTHON_PROBE_CACHE is 0.
std::optional<std::filesystem::path> defaultProbeCacheFile(const Environment& env);

}  // namespace ddprun::launcher

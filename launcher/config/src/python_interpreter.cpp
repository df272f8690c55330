#include "ddprun/launcher/config/python_interpreter.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>
#include <vector>

#include "ddprun/launcher/process/executable_path.hpp"
#include "ddprun/launcher/process/memory_file.hpp"
#include "ddprun/launcher/process/subprocess.hpp"
#include "ddprun/proto/errors.hpp"

namespace ddprun::launcher {
namespace {

namespace fs = std::filesystem;

// Exit status 0 when torch can be found, 1 when not; on stdout, torch's
// __init__.py and sys.path, NUL-separated (what TorchProbeCache stamps). `-c`
// puts the working directory first on sys.path, where a worker's script
// never has it: a torch/ source tree there must not count.
constexpr const char* kFindTorch =
    "import importlib.util, sys; sys.path = [p for p in sys.path if p]; "
    "s = importlib.util.find_spec('torch'); "
    "sys.stdout.write(chr(0).join([(s and s.origin) or ''] + sys.path)); "
    "sys.exit(s is None)";

TorchProbeAnswer parseAnswer(const std::string& output) {
  TorchProbeAnswer answer;
  answer.found = true;
  std::size_t start = 0;
  for (std::size_t end = 0; end != std::string::npos; start = end + 1) {
    end = output.find('\0', start);
    const std::string field = output.substr(start, end == std::string::npos ? end : end - start);
    if (start == 0) {
      answer.torch_origin = field;
    } else {
      answer.sys_path.push_back(field);
    }
  }
  return answer;
}

// Starts `python` with the probe; nullopt when torch is not found (or the
// probe failed: it is then passed by as well).
std::optional<TorchProbeAnswer> askPython(const std::string& python,
                                          const TorchProbeOptions& options) {
  // A memory file, so that a long sys.path never blocks the probe.
  const MemoryFile output("ddprun-python-probe");
  const int discard = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  SpawnOptions spawn;
  spawn.argv = {python, "-c", kFindTorch};
  spawn.env = options.env;
  spawn.stdout_fd = output.fd();
  spawn.stderr_fd = discard;
  const auto status = runWithin(spawn, options.deadline);
  if (discard >= 0) {
    ::close(discard);
  }
  if (!status || !status->success()) {
    return std::nullopt;
  }
  return parseAnswer(output.text());
}

struct ActiveEnvironment {
  const char* variable;
  const char* kind;
};

constexpr ActiveEnvironment kActiveEnvironments[] = {{"VIRTUAL_ENV", "virtual environment"},
                                                     {"CONDA_PREFIX", "conda environment"}};

// An activated environment puts its bin/ first on PATH: then its python is
// the first python3 on PATH in all but name, and not worth a line.
bool sameDirectory(const std::string& a, const std::string& b) {
  return !b.empty() && fs::path(a).parent_path().lexically_normal() ==
                           fs::path(b).parent_path().lexically_normal();
}

std::string joined(const std::vector<std::string>& items) {
  std::string text;
  for (const std::string& item : items) {
    text += (text.empty() ? "" : ", ") + item;
  }
  return text;
}

// The active environment's python, if one is set and finds torch; `tried`
// gets those set without one, or without torch (a conda base activated by a
// shell's start-up, while the job's torch comes from PATH).
std::optional<PythonChoice> activeEnvironmentPython(const Environment& env,
                                                    const std::string& first_on_path,
                                                    const TorchProbe& finds_torch,
                                                    std::vector<std::string>& tried) {
  for (const ActiveEnvironment& active : kActiveEnvironments) {
    const auto prefix = env(active.variable);
    if (!prefix || prefix->empty()) {
      continue;
    }
    const std::string python = (fs::path(*prefix) / "bin" / "python").string();
    if (!isExecutableFile(python)) {
      tried.push_back(std::string("$") + active.variable + " (no " + python + ")");
      continue;
    }
    if (!finds_torch(python)) {
      tried.push_back(std::string("$") + active.variable + "'s " + python + " (no torch)");
      continue;
    }
    if (sameDirectory(python, first_on_path)) {
      return PythonChoice{python, ""};
    }
    return PythonChoice{python, std::string("the active ") + active.kind + ", $" + active.variable +
                                    "; the first python3 on PATH is " +
                                    (first_on_path.empty() ? "none" : first_on_path)};
  }
  return std::nullopt;
}

}  // namespace

PythonChoice choosePython(const Environment& env, const TorchProbe& finds_torch) {
  if (const auto exec = env("PYTHON_EXEC"); exec && !exec->empty()) {
    return {*exec, ""};
  }
  const std::vector<std::string> on_path = findExecutables("python3", env("PATH").value_or(""));
  std::vector<std::string> tried;
  const std::string first_on_path = on_path.empty() ? "" : on_path.front();
  if (auto active = activeEnvironmentPython(env, first_on_path, finds_torch, tried)) {
    return *active;
  }
  std::vector<std::string> without_torch;
  for (const std::string& python : on_path) {
    if (finds_torch(python)) {
      const std::vector<std::string>& passed = without_torch.empty() ? tried : without_torch;
      return {python, passed.empty() ? ""
                                     : "the first python3 on PATH that can import torch; " +
                                           joined(passed) + " cannot"};
    }
    without_torch.push_back(python);
  }
  tried.insert(tried.end(), without_torch.begin(), without_torch.end());
  throw ConfigError("no Python that can import torch: PYTHON_EXEC is unset, " +
                    (on_path.empty() ? std::string("there is no python3 on PATH")
                                     : "no python3 on PATH finds torch") +
                    (tried.empty() ? "" : " (tried " + joined(tried) + ")") +
                    "; set PYTHON_EXEC to the interpreter the workers should run with");
}

TorchProbeOptions agentProbeOptions() {
  TorchProbeOptions options;
  options.env = inheritedEnvironment();
  options.cache_file = defaultProbeCacheFile(processEnvironment());
  return options;
}

std::optional<std::string> torchOrigin(const std::string& python,
                                       const TorchProbeOptions& options) {
  if (options.cache_file) {
    if (auto kept = TorchProbeCache(*options.cache_file).keptTorchOrigin(python, options.env)) {
      return kept;
    }
  }
  const auto answer = askPython(python, options);
  if (!answer) {
    return std::nullopt;
  }
  if (options.cache_file) {
    TorchProbeCache(*options.cache_file).remember(python, options.env, *answer);
  }
  return answer->torch_origin;
}

bool findsTorch(const std::string& python, const TorchProbeOptions& options) {
  return torchOrigin(python, options).has_value();
}

std::optional<TorchVersion> torchVersionAt(const std::string& origin) {
  if (origin.empty()) {
    return std::nullopt;
  }
  // torch/version.py, written by torch's build: `__version__ = '2.6.0+cu124'`.
  std::ifstream in(fs::path(origin).parent_path() / "version.py");
  static const std::regex kVersion(R"(^__version__\s*=\s*['"](\d+)\.(\d+))");
  std::smatch match;
  for (std::string line; std::getline(in, line);) {
    if (std::regex_search(line, match, kVersion)) {
      return TorchVersion{std::stoi(match[1].str()), std::stoi(match[2].str())};
    }
  }
  return std::nullopt;
}

}  // namespace ddprun::launcher

#include "ddprun/launcher/config/worker_command.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cctype>
#include <fstream>
#include <optional>
#include <stdexcept>

#include "ddprun/launcher/process/executable_path.hpp"

namespace ddprun::launcher {
namespace {

// What `torchrun --run-path` does in its spawned interpreter: argv becomes
// [script, args...] and the script runs as __main__.
constexpr const char* kRunPathBootstrap =
    "import runpy, sys; sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')";

constexpr std::string_view kMacro = "local_rank";

bool isIdentifierStart(char c) {
  return std::isalpha(static_cast<unsigned char>(c)) != 0 || c == '_';
}

bool isIdentifierChar(char c) {
  return isIdentifierStart(c) || std::isdigit(static_cast<unsigned char>(c)) != 0;
}

std::size_t identifierEnd(std::string_view text, std::size_t start) {
  if (start >= text.size() || !isIdentifierStart(text[start])) {
    return start;
  }
  auto end = start + 1;
  while (end < text.size() && isIdentifierChar(text[end])) {
    ++end;
  }
  return end;
}

bool hasPythonSuffix(const std::string& path) {
  for (const std::string_view suffix : {".py", ".pyw", ".pyc", ".pyz"}) {
    if (path.size() >= suffix.size() &&
        path.compare(path.size() - suffix.size(), suffix.size(), suffix) == 0) {
      return true;
    }
  }
  return false;
}

}  // namespace

std::string expandLocalRank(std::string_view arg, int local_rank) {
  const std::string rank = std::to_string(local_rank);
  std::string out;
  std::size_t i = 0;
  while (i < arg.size()) {
    if (arg[i] != '$' || i + 1 >= arg.size()) {
      out += arg[i++];
      continue;
    }
    if (arg[i + 1] == '$') {
      out += '$';
      i += 2;
      continue;
    }
    const bool braced = arg[i + 1] == '{';
    const auto name_start = i + (braced ? 2 : 1);
    const auto name_end = identifierEnd(arg, name_start);
    const bool closed = !braced || (name_end < arg.size() && arg[name_end] == '}');
    if (name_end == name_start || !closed) {
      out += '$';  // not a placeholder: safe_substitute leaves it alone
      ++i;
      continue;
    }
    const auto end = name_end + (braced ? 1 : 0);
    out += arg.substr(name_start, name_end - name_start) == kMacro
               ? rank
               : std::string(arg.substr(i, end - i));
    i = end;
  }
  return out;
}

bool isDirectExecutable(const std::string& path) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0 || !S_ISREG(info.st_mode) ||
      ::access(path.c_str(), X_OK) != 0 || hasPythonSuffix(path)) {
    return false;
  }
  std::ifstream file(path, std::ios::binary);
  std::string first_line;
  std::getline(file, first_line);
  if (first_line.rfind("\x7f"
                       "ELF",
                       0) == 0) {
    return true;
  }
  return first_line.rfind("#!", 0) == 0 && first_line.find("python") == std::string::npos;
}

namespace {

// The program to exec without Python, if the script is one: a path that
// isDirectExecutable(), or a bare name that is no file here but such a
// program on PATH (an installed `train`), found as a shell would find it.
std::optional<std::string> directProgram(const std::string& script, const Environment& env) {
  if (isDirectExecutable(script)) {
    return script;
  }
  struct stat info {};
  if (script.find('/') != std::string::npos || ::stat(script.c_str(), &info) == 0) {
    return std::nullopt;
  }
  const auto found = findExecutable(script, env("PATH").value_or(""));
  return found && isDirectExecutable(*found) ? found : std::nullopt;
}

// The program a worker execs when it needs no Python; nullopt when it does.
// --run-path always runs in Python, even with --no-python (as torchrun's).
std::optional<std::string> programWithoutPython(const LaunchConfig& config,
                                                const Environment& env) {
  if (config.run_path || config.module) {
    return std::nullopt;
  }
  if (config.no_python) {
    return config.training_script;
  }
  return directProgram(config.training_script, env);
}

}  // namespace

bool runsUnderPython(const LaunchConfig& config, const Environment& env) {
  return !programWithoutPython(config, env);
}

std::vector<std::string> workerCommand(const LaunchConfig& config, int local_rank,
                                       const Environment& env, const std::string& python) {
  std::vector<std::string> argv;
  if (auto program = programWithoutPython(config, env)) {
    argv.push_back(std::move(*program));
  } else {
    if (python.empty()) {
      throw std::logic_error("workerCommand: a Python worker needs an interpreter");
    }
    argv = {python, "-u"};
    if (config.run_path) {
      argv.insert(argv.end(), {"-c", kRunPathBootstrap});
    } else if (config.module) {
      argv.push_back("-m");
    }
    argv.push_back(config.training_script);
  }
  argv.insert(argv.end(), config.training_script_args.begin(), config.training_script_args.end());
  // torchrun substitutes every argument but not the entrypoint itself.
  for (std::size_t i = 1; i < argv.size(); ++i) {
    argv[i] = expandLocalRank(argv[i], local_rank);
  }
  return argv;
}

}  // namespace ddprun::launcher

// Builds each worker's argv the way torchrun 2.14 does (run.py:948-1093 and
// the ${local_rank} macro of elastic/utils/api.py), plus one ddprun rule: an
// executable that is not a Python file runs directly. Stateless free
// functions; isDirectExecutable and runsUnderPython look at the filesystem.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "ddprun/launcher/core/environment.hpp"
#include "ddprun/launcher/core/launch_config.hpp"

namespace ddprun::launcher {

// argv[0] is the program to exec (`python`, or the script as given for
// direct execution). Every element after argv[0] has had ${local_rank}
// expanded. `python` (python_interpreter.hpp, chosen once per agent) is used
// only when runsUnderPython(); it must then not be empty.
//  - default:      <python> -u [-m] script args...
//  - --no-python:  script args...
//  - --run-path:   <python> -u -c <runpy.run_path(script) bootstrap> script args...
//  - a script that isDirectExecutable(), or a bare name that is no file in
//    the cwd but such a program on $PATH (e.g. an installed `train`): the
//    program, then args... (ddprun's extra rule)
std::vector<std::string> workerCommand(const LaunchConfig& config, int local_rank,
                                       const Environment& env, const std::string& python);

// Whether the workers run under Python (so an interpreter must be chosen):
// not with --no-python (unless --run-path), nor for a direct executable.
bool runsUnderPython(const LaunchConfig& config, const Environment& env);

// string.Template(arg).safe_substitute(local_rank=N): "$local_rank" and
// "${local_rank}" become N, "$$" becomes "$", anything else stays as written.
std::string expandLocalRank(std::string_view arg, int local_rank);

// ddprun's rule for running a script without Python: a regular file with an
// execute bit, no .py/.pyw/.pyc/.pyz suffix, and either an ELF header or a
// "#!" line that does not mention python. Text without "#!" stays with
// Python, as torchrun would run it. Relative paths are taken from the cwd.
bool isDirectExecutable(const std::string& path);

}  // namespace ddprun::launcher

// The ddprun command line: torchrun 2.14's options (both spellings), their
// PET_* environment fallbacks, the positional script with its arguments
// passed through verbatim, and the pure-configuration rules of
// docs/torchrun-contract.md §3.
// Stateless free functions; safe on any thread.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "ddprun/launcher/core/environment.hpp"
#include "ddprun/launcher/core/launch_config.hpp"

namespace ddprun::launcher {

// Makes the run id for --standalone and the single-node auto-port rule.
using RunIdGenerator = std::function<std::string()>;

// A random version-4 UUID in its canonical text form, like Python's uuid.uuid4().
std::string randomUuid();

// Parses the arguments that follow the program name. Throws ddprun::ConfigError
// with one line naming the flag (or PET_ variable) and why it is wrong; the
// caller prints it with usage() and exits 2. -h/--help before the script
// returns a config with show_help set, --print-completion one with
// print_completion set, --version one with show_version set. Long options may
// be abbreviated as argparse allows (--version only spelled in full).
LaunchConfig parseCommandLine(std::vector<std::string> args, const Environment& env,
                              const RunIdGenerator& make_run_id = randomUuid);

// argparse-style usage lines, printed after an error.
std::string usage();

// argparse-style help for -h/--help: the usage, a description, the
// positional arguments, then the options in torchrun's groups.
std::string helpText();

// The completion script --print-completion prints for `shell` ("bash" or
// "zsh"); ConfigError for any other shell.
std::string completionScript(std::string_view shell);

}  // namespace ddprun::launcher

// ddprun's subcommands: `ddprun <name> ...` where <name> is one of them runs
// that tool (they ask or read, and never launch workers) instead of a job.
// Only the first argument is looked at, so a training program of the same
// name still runs as `./<name>` or by its path.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace ddprun::launcher {

// The exit status of the subcommand `args[0]` names, run with the rest of
// `args`; nullopt when `args` does not start with a subcommand's name.
std::optional<int> runSubcommand(const std::vector<std::string>& args);

}  // namespace ddprun::launcher

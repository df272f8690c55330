#include "ddprun/launcher/app/subcommands.hpp"

#include <array>
#include <string_view>

#include "ddprun/launcher/host/devices_command.hpp"
#include "ddprun/launcher/observe/status_command.hpp"
#include "ddprun/launcher/observe/timeline_command.hpp"

namespace ddprun::launcher {
namespace {

struct Subcommand {
  std::string_view name;
  int (*run)(const std::vector<std::string>& args);  // args after the name
};

// Each subcommand is one entry here and a file of its own.
constexpr std::array<Subcommand, 3> kSubcommands{{
    {"devices", &runDevicesCommand},
    {"status", &runStatusCommand},
    {"timeline", &runTimelineCommand},
}};

}  // namespace

std::optional<int> runSubcommand(const std::vector<std::string>& args) {
  if (args.empty()) {
    return std::nullopt;
  }
  for (const Subcommand& subcommand : kSubcommands) {
    if (args.front() == subcommand.name) {
      return subcommand.run({args.begin() + 1, args.end()});
    }
  }
  return std::nullopt;
}

}  // namespace ddprun::launcher

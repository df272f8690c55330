// Shared helpers for the launcher command-line tests: parse with a fixed
// environment and a fixed run id, and capture ConfigError messages.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "ddprun/launcher/config/cli.hpp"
#include "ddprun/proto/errors.hpp"

namespace ddprun::launcher::testing {

using EnvMap = std::map<std::string, std::string, std::less<>>;

inline constexpr const char* kTestRunId = "00000000-test-run-id";

inline LaunchConfig parse(std::vector<std::string> args, EnvMap env = {}) {
  return parseCommandLine(std::move(args), mapEnvironment(std::move(env)),
                          [] { return std::string(kTestRunId); });
}

// The ConfigError message, or "<no error>" when parsing succeeds.
inline std::string parseError(std::vector<std::string> args, EnvMap env = {}) {
  try {
    parse(std::move(args), std::move(env));
  } catch (const ConfigError& error) {
    return error.what();
  }
  return "<no error>";
}

}  // namespace ddprun::launcher::testing

// Waiting for a child's port file: how a test or a benchmark learns which
// port a daemon or server it started with --port 0 picked. Runs on the
// calling thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>

#include "ddprun/launcher/process/subprocess.hpp"

namespace ddprun::test_support {

// Polls `path` until it holds a port (a number from 1 to 65535 and a
// newline), `child` exits or `timeout` passes. The port, or nullopt; then
// child.exitStatus() tells an exit from a timeout.
std::optional<std::uint16_t> waitForPortFile(const std::filesystem::path& path,
                                             launcher::Subprocess& child,
                                             std::chrono::milliseconds timeout);

}  // namespace ddprun::test_support

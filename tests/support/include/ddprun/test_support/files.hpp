// Small file and port helpers the process-level tests share: a whole file as
// text, a fake worker's KEY=value environment file, and a free loopback port.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>

namespace ddprun::test_support {

// The file's contents; empty if it cannot be read.
std::string readFile(const std::filesystem::path& path);

// KEY=value lines (as the fake worker's --env-to writes them) as a map.
std::map<std::string, std::string> readEnvFile(const std::filesystem::path& path);

// A TCP port on 127.0.0.1 that was free a moment ago (bound, then released),
// never one this process was given before.
std::uint16_t freeLoopbackPort();

}  // namespace ddprun::test_support

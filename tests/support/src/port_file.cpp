#include "ddprun/test_support/port_file.hpp"

#include "ddprun/test_support/files.hpp"

namespace ddprun::test_support {
namespace {

// Between looks at the file; the wait on the child returns early if it exits.
constexpr std::chrono::milliseconds kPollPeriod(2);

// The port once the whole file is there: daemons rename it into place, but a
// plain write is tolerated by insisting on the trailing newline.
std::optional<std::uint16_t> portIn(const std::string& text) {
  if (text.empty() || text.back() != '\n') {
    return std::nullopt;
  }
  try {
    const unsigned long port = std::stoul(text);
    if (port > 0 && port <= 65535) {
      return static_cast<std::uint16_t>(port);
    }
  } catch (const std::logic_error&) {
    // Not a number: not a port file yet.
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::uint16_t> waitForPortFile(const std::filesystem::path& path,
                                             launcher::Subprocess& child,
                                             std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (const auto port = portIn(readFile(path))) {
      return port;
    }
    if (child.exitStatus() || std::chrono::steady_clock::now() >= deadline) {
      return std::nullopt;
    }
    child.waitFor(kPollPeriod);
  }
}

}  // namespace ddprun::test_support

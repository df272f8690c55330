// The rendezvous token: a shared secret in a file, read by ddprund
// (--token-file) and by every agent (--rdzv-conf token_file=PATH). Agents
// prove they hold it when they join (a challenge and an HMAC; see
// docs/rendezvous-protocol.md), so it never crosses the network. Stateless.
#pragma once

#include <optional>
#include <string>

namespace ddprun::rdzv {

struct Token {
  std::string secret;
  std::optional<std::string> warning;  // e.g. the file is readable by other users
};

// The file's contents without trailing whitespace. Throws ConfigError naming
// `what` (the flag) and the file when it cannot be read or is empty.
Token readTokenFile(const std::string& what, const std::string& path);

}  // namespace ddprun::rdzv

// Environment: a read-only lookup of environment variables, injected into the
// command-line layer so tests never read or change the real process
// environment. Copies are cheap and safe to share between threads as long as
// the underlying source is not modified.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace ddprun::launcher {

// Returns the variable's value, or nullopt when it is unset (set-but-empty is "").
using Environment = std::function<std::optional<std::string>(std::string_view)>;

// Reads the real environment (getenv) at lookup time.
Environment processEnvironment();

// This machine's host name (gethostname); "localhost" when it has none.
std::string thisHostName();

// A fixed set of variables, for tests and for callers that snapshot the environment.
Environment mapEnvironment(std::map<std::string, std::string, std::less<>> variables);

}  // namespace ddprun::launcher

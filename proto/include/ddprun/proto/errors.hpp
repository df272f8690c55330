// ddprun's error tiers (see README "Errors"):
//  1. Broken invariants (our bug): DDPRUN_ASSERT logs and aborts.
//  2. A peer's mistake on an asynchronous path: a value (DecodeResult::Bad,
//     error_code) that closes that one connection.
//  3. A caller's mistake or a failure at a blocking API or at start-up: one of
//     the exceptions below, split by origin, caught in main() and mapped to an
//     exit code.
#pragma once

#include <stdexcept>
#include <string>

namespace ddprun {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Bad flags, environment or configuration.
class ConfigError : public Error {
 public:
  using Error::Error;
};

// A socket could not be opened, connected, read or written.
class NetworkError : public Error {
 public:
  using Error::Error;
};

// The store answered something that breaks the protocol.
class StoreError : public Error {
 public:
  using Error::Error;
};

// A blocking call ran past its deadline.
class TimeoutError : public Error {
 public:
  using Error::Error;
};

[[noreturn]] void assertionFailed(const char* condition, const char* file, int line,
                                  const std::string& message);

}  // namespace ddprun

// Aborts (in every build type) when an invariant of ddprun's own code breaks.
// Never use it for anything a peer, the OS or a user controls.
#define DDPRUN_ASSERT(cond, message)                                   \
  do {                                                                 \
    if (!(cond)) {                                                     \
      ::ddprun::assertionFailed(#cond, __FILE__, __LINE__, (message)); \
    }                                                                  \
  } while (false)

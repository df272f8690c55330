// Whether this build runs under AddressSanitizer (-DDDPRUN_SANITIZE=ON): the
// tests are built with the flags of the programs they run, so a test knows
// from its own build what a program it starts runs under. For the few tests
// whose measurement ASan changes (resident memory, a deliberate crash's
// signal). Header only; any thread.
#pragma once

#include <stdlib.h>

#include <cstdlib>
#include <optional>
#include <string>

namespace ddprun::test_support {

#if defined(__SANITIZE_ADDRESS__)  // GCC, and clang from 16
inline constexpr bool kAddressSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool kAddressSanitizer = true;
#else
inline constexpr bool kAddressSanitizer = false;
#endif
#else
inline constexpr bool kAddressSanitizer = false;
#endif

// $ASAN_OPTIONS with `option` ("name=value") appended, for a child's
// environment: ASan reads its options at start, and a later one wins.
inline std::string asanOptionsWith(const std::string& option) {
  const char* inherited = std::getenv("ASAN_OPTIONS");
  if (inherited == nullptr || *inherited == '\0') {
    return option;
  }
  return std::string(inherited) + ":" + option;
}

// Under ASan, adds `option` to ASAN_OPTIONS for the children started while
// it lives (each reads it once, at its start), then puts ASAN_OPTIONS back;
// nothing in a plain build. One test thread (the environment is the
// process's).
class ChildAsanOption {
 public:
  explicit ChildAsanOption(const std::string& option) {
    if (!kAddressSanitizer) {
      return;
    }
    if (const char* inherited = std::getenv("ASAN_OPTIONS"); inherited != nullptr) {
      inherited_ = inherited;
    }
    ::setenv("ASAN_OPTIONS", asanOptionsWith(option).c_str(), 1);
  }
  ~ChildAsanOption() {
    if (!kAddressSanitizer) {
      return;
    }
    if (inherited_) {
      ::setenv("ASAN_OPTIONS", inherited_->c_str(), 1);
    } else {
      ::unsetenv("ASAN_OPTIONS");
    }
  }
  ChildAsanOption(const ChildAsanOption&) = delete;
  ChildAsanOption& operator=(const ChildAsanOption&) = delete;

 private:
  std::optional<std::string> inherited_;
};

}  // namespace ddprun::test_support

// What the dynamic loader has to do before ddprun's main(): the shared
// libraries the ddprun executable names (its DT_NEEDED entries, as readelf
// lists them). Each one is mapped, relocated and has its symbols resolved at
// every start; libstdc++, spdlog and fmt, and OpenSSL's two libraries were
// half of `ddprun --version`'s time (docs/benchmarks.md, "Where a launch's
// time goes"), so they are linked into the executable (ddprun_program() in
// cmake/DdprunHelpers.cmake). Not under the sanitizers, whose runtimes need
// the shared libstdc++.
#include <gtest/gtest.h>

#include <regex>
#include <set>
#include <string>

#include "ddprun/test_support/command.hpp"

namespace ddprun::launcher {
namespace {

// The sonames `readelf -d` lists as NEEDED for `program`.
std::set<std::string> neededLibraries(const std::string& program) {
  test_support::CommandOptions options;
  options.env = {{"PATH", "/usr/bin:/bin"}, {"LC_ALL", "C"}};
  const auto result = test_support::runCommand({"readelf", "-d", program}, options);
  EXPECT_EQ(result.code, 0) << result.errors;
  std::set<std::string> needed;
  const std::regex entry(R"(\(NEEDED\)\s+Shared library: \[([^\]]+)\])");
  for (std::sregex_iterator it(result.output.begin(), result.output.end(), entry), end; it != end;
       ++it) {
    needed.insert((*it)[1].str());
  }
  return needed;
}

bool namesLibrary(const std::set<std::string>& needed, const std::string& prefix) {
  for (const std::string& soname : needed) {
    if (soname.rfind(prefix, 0) == 0) {
      return true;
    }
  }
  return false;
}

TEST(DdprunLinkingTest, StartsWithoutTheCxxRuntimeSpdlogFmtOrOpenSslAsSharedLibraries) {
#if DDPRUN_SANITIZED
  GTEST_SKIP() << "a sanitized build links the shared libstdc++ on purpose";
#endif
  const std::set<std::string> needed = neededLibraries(DDPRUN_BINARY);
  ASSERT_TRUE(namesLibrary(needed, "libc.so")) << "readelf listed no libc: not its output?";
  for (const char* library : {"libstdc++.so", "libgcc_s.so", "libspdlog.so", "libfmt.so"}) {
    EXPECT_FALSE(namesLibrary(needed, library)) << DDPRUN_BINARY << " needs " << library;
  }
#if DDPRUN_STATIC_OPENSSL
  for (const char* library : {"libssl.so", "libcrypto.so"}) {
    EXPECT_FALSE(namesLibrary(needed, library)) << DDPRUN_BINARY << " needs " << library;
  }
#endif
}

// hwloc and the libudev it needs are loaded only when --numa-binding reads
// the machine's topology (launcher/host/src/hwloc_library.hpp): mapped at
// every start, they cost 0.2 ms of each launch.
TEST(DdprunLinkingTest, StartsWithoutHwloc) {
  const std::set<std::string> needed = neededLibraries(DDPRUN_BINARY);
  ASSERT_TRUE(namesLibrary(needed, "libc.so")) << "readelf listed no libc: not its output?";
  for (const char* library : {"libhwloc.so", "libudev.so"}) {
    EXPECT_FALSE(namesLibrary(needed, library)) << DDPRUN_BINARY << " needs " << library;
  }
}

}  // namespace
}  // namespace ddprun::launcher

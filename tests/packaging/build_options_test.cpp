// The build's options, each configured from this source tree into a fresh
// build directory of the test's own: a build of the programs and benchmarks
// without the suites (-DDDPRUN_BUILD_TESTS=OFF) configures, as a packager or
// a benchmark-only machine builds them.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ddprun/launcher/process/subprocess.hpp"
#include "ddprun/test_support/command.hpp"
#include "ddprun/test_support/temp_dir.hpp"

namespace ddprun {
namespace {

test_support::CommandResult configure(const std::vector<std::string>& options) {
  const test_support::TempDir build("ddprun-build-options");
  std::vector<std::string> argv = {DDPRUN_CMAKE,          "-S", DDPRUN_SOURCE_DIR,     "-B",
                                   build.path().string(), "-G", DDPRUN_CMAKE_GENERATOR};
  argv.insert(argv.end(), options.begin(), options.end());
  return test_support::runCommand(argv,
                                  {launcher::inheritedEnvironment(), std::chrono::seconds(120)});
}

TEST(BuildOptionsTest, TheBenchmarksConfigureWithoutTheSuites) {
  const auto result = configure({"-DDDPRUN_BUILD_TESTS=OFF", "-DDDPRUN_BUILD_BENCH=ON"});
  EXPECT_EQ(result.code, 0) << result.output << result.errors;
}

}  // namespace
}  // namespace ddprun

// checkNodeHealth with real commands: what passes, and the one line for each
// way a node is unfit (the command's status, its timeout, a run directory
// that takes no file).
#include "ddprun/launcher/host/health_check.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>

#include "ddprun/test_support/temp_dir.hpp"

namespace ddprun::launcher {
namespace {

using namespace std::chrono_literals;

TEST(HealthCheckTest, ANodeWithNothingToCheckIsFit) {
  EXPECT_EQ(checkNodeHealth({}, 0), std::nullopt);
  EXPECT_EQ(checkNodeHealth({}, 3), std::nullopt);
}

TEST(HealthCheckTest, ACommandThatExitsZeroIsFit) {
  HealthCheck check;
  check.command = "test -d /";
  EXPECT_EQ(checkNodeHealth(check, 0), std::nullopt);
}

TEST(HealthCheckTest, ACommandThatFailsNamesItselfAndItsStatus) {
  HealthCheck check;
  check.command = "echo checking >&2; exit 7";
  EXPECT_EQ(checkNodeHealth(check, 0),
            "--health-check 'echo checking >&2; exit 7' exited with code 7");
}

TEST(HealthCheckTest, ACommandThatNeverAnswersIsCutOffAtItsTimeout) {
  HealthCheck check;
  check.command = "sleep 60 & sleep 60";
  check.timeout = 300ms;
  const auto started = std::chrono::steady_clock::now();
  EXPECT_EQ(checkNodeHealth(check, 0),
            "--health-check 'sleep 60 & sleep 60' gave no answer "
            "within 0.3 s");
  EXPECT_LT(std::chrono::steady_clock::now() - started, 5s) << "its children were killed too";
}

TEST(HealthCheckTest, ARunDirectoryThatTakesNoFileIsUnfit) {
  if (::geteuid() == 0) {
    GTEST_SKIP() << "root writes into a read-only directory; a missing one is checked instead";
  }
  test_support::TempDir dir("ddprun-health");
  ASSERT_EQ(::chmod(dir.path().c_str(), 0500), 0);
  HealthCheck check;
  check.run_dir = dir.path();
  const auto why = checkNodeHealth(check, 0);
  ::chmod(dir.path().c_str(), 0700);
  ASSERT_TRUE(why);
  EXPECT_NE(why->find("takes no new file: Permission denied"), std::string::npos) << *why;
}

TEST(HealthCheckTest, AVanishedRunDirectoryIsUnfit) {
  test_support::TempDir dir("ddprun-health");
  HealthCheck check;
  check.run_dir = dir.path() / "gone";
  const auto why = checkNodeHealth(check, 0);
  ASSERT_TRUE(why);
  EXPECT_NE(why->find("gone takes no new file: No such file or directory"), std::string::npos)
      << *why;
  check.run_dir = dir.path();
  EXPECT_EQ(checkNodeHealth(check, 0), std::nullopt);
}

}  // namespace
}  // namespace ddprun::launcher

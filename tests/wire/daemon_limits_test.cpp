// ddprund's file descriptor limit, through the real binary: it raises its
// soft limit to the hard one at start and logs the limit it has; out of
// descriptors, it says so once per burst of failed accepts, naming the limit
// and how to raise it, and says when it accepts again.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "ddprun/test_support/daemon_process.hpp"
#include "ddprun/test_support/eventually.hpp"
#include "ddprun/test_support/raw_connection.hpp"

namespace ddprun::wire_test {
namespace {

using namespace std::chrono_literals;
using test_support::DaemonProcess;
using test_support::eventually;
using test_support::RawConnection;

int countOf(const std::string& text, const std::string& needle) {
  int count = 0;
  for (auto at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) {
    ++count;
  }
  return count;
}

// The "Max open files" soft limit /proc says `pid` has.
std::uint64_t softLimitOf(pid_t pid) {
  std::ifstream limits("/proc/" + std::to_string(pid) + "/limits");
  for (std::string line; std::getline(limits, line);) {
    if (line.rfind("Max open files", 0) == 0) {
      std::istringstream fields(line.substr(std::string("Max open files").size()));
      std::uint64_t soft = 0;
      fields >> soft;
      return soft;
    }
  }
  return 0;
}

std::size_t openDescriptorsOf(pid_t pid) {
  std::size_t count = 0;
  for ([[maybe_unused]] const auto& entry :
       std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd")) {
    ++count;
  }
  return count;
}

// Started with a soft limit far below its hard one (as a login shell's 1024
// under a hard limit of 1048576), ddprund runs with the hard limit and says so.
TEST(DaemonLimitsTest, ItRaisesItsDescriptorLimitToTheHardLimitAndLogsIt) {
  rlimit saved{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &saved), 0);
  if (saved.rlim_max != RLIM_INFINITY && saved.rlim_max <= 256) {
    GTEST_SKIP() << "the hard limit is already as low as the lowered soft one";
  }
  rlimit lowered = saved;
  lowered.rlim_cur = 256;
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &lowered), 0);
  std::unique_ptr<DaemonProcess> daemon;
  try {
    daemon = std::make_unique<DaemonProcess>();
  } catch (...) {
    setrlimit(RLIMIT_NOFILE, &saved);
    throw;
  }
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &saved), 0);  // only the child started low
  const std::uint64_t hard = saved.rlim_max;
  std::uint64_t expected = hard;
  if (saved.rlim_max == RLIM_INFINITY) {
    std::ifstream("/proc/sys/fs/nr_open") >> expected;
  }
  EXPECT_EQ(softLimitOf(daemon->pid()), expected);
  const std::string line =
      "file descriptor limit (RLIMIT_NOFILE) " + std::to_string(expected) + ", raised from 256";
  EXPECT_TRUE(eventually([&] { return daemon->stderrText().find(line) != std::string::npos; }, 5s))
      << daemon->stderrText();
}

// Out of descriptors (its hard limit lowered under it, as a small
// LimitNOFILE would), ddprund warns once per burst of failed accepts, naming
// the limit and how to raise it, however many times it retries; it says when
// it accepts again, and a later burst warns again.
TEST(DaemonLimitsTest, OutOfDescriptorsIsOneWarningPerBurstNamingTheLimit) {
  DaemonProcess daemon({"--log-level", "debug"});
  const rlim_t limit = openDescriptorsOf(daemon.pid()) + 3;  // room for three clients
  const rlimit lowered{limit, limit};
  ASSERT_EQ(prlimit(daemon.pid(), RLIMIT_NOFILE, &lowered, nullptr), 0);
  const std::string warning = "ddprund cannot accept a connection";
  const auto burst = [&](int expected_warnings) {
    std::vector<RawConnection> clients;
    for (int i = 0; i < 8; ++i) {
      clients.emplace_back(daemon.port());  // the kernel's backlog completes the handshake
    }
    // Retried at least three times while out of descriptors...
    EXPECT_TRUE(eventually(
        [&] {
          const std::string log = daemon.stderrText();
          return countOf(log, warning) == expected_warnings &&
                 log.rfind("accept retry 3 failed") != std::string::npos &&
                 log.rfind("accept retry 3 failed") > log.rfind(warning);
        },
        10s))
        << daemon.stderrText();
    // ... with one warning for them all.
    EXPECT_EQ(countOf(daemon.stderrText(), warning), expected_warnings) << daemon.stderrText();
    clients.clear();  // their descriptors free in the daemon: it accepts again
    EXPECT_TRUE(eventually(
        [&] {
          return countOf(daemon.stderrText(), "ddprund accepts connections again") ==
                 expected_warnings;
        },
        10s))
        << daemon.stderrText();
  };
  burst(1);
  const std::string log = daemon.stderrText();
  const std::string first = log.substr(log.find(warning));
  const std::string line = first.substr(0, first.find('\n'));
  EXPECT_NE(line.find("Too many open files"), std::string::npos) << line;
  EXPECT_NE(line.find("every one of its " + std::to_string(limit) + " file descriptors is in use"),
            std::string::npos)
      << line;
  EXPECT_NE(line.find("ulimit -n"), std::string::npos) << line;
  EXPECT_NE(line.find("LimitNOFILE="), std::string::npos) << line;
  burst(2);
}

}  // namespace
}  // namespace ddprun::wire_test

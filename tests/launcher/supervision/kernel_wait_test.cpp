// Where a process waits in the kernel, as /proc tells it (kernel_wait.hpp):
// the parsing of /proc/<pid>/stack on fixed text, the one-line description,
// and the reads on a real process asleep in nanosleep(2) and on one that is
// gone. Reading /proc/<pid>/stack takes CAP_SYS_ADMIN: as root the stack is
// there, otherwise the reason it is not.
#include "ddprun/launcher/supervision/kernel_wait.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>

#include "ddprun/launcher/process/subprocess.hpp"
#include "ddprun/test_support/eventually.hpp"

namespace ddprun::launcher {
namespace {

using namespace std::chrono_literals;

// A FUSE flush that never gets its answer, as this machine's kernel printed it.
constexpr const char* kFuseFlushStack =
    "[<0>] request_wait_answer+0x1d8/0x290\n"
    "[<0>] __fuse_simple_request+0x120/0x330\n"
    "[<0>] fuse_flush+0x192/0x1d0\n"
    "[<0>] filp_close+0x13/0x40\n"
    "[<0>] put_files_struct.part.0+0x5a/0xc0\n"
    "[<0>] do_exit+0x779/0xab0\n";

TEST(KernelWaitTest, TheStackIsItsFunctionNamesInnermostFirst) {
  EXPECT_EQ(parseKernelStack(kFuseFlushStack),
            (std::vector<std::string>{"request_wait_answer", "__fuse_simple_request", "fuse_flush",
                                      "filp_close", "put_files_struct.part.0", "do_exit"}));
  EXPECT_TRUE(parseKernelStack("").empty());
  EXPECT_EQ(parseKernelStack("[<ffffffffa0001234>] nfs_wait_bit_killable+0x1c/0x90 [nfs]\n"),
            std::vector<std::string>{"nfs_wait_bit_killable"});
}

TEST(KernelWaitTest, OneLineSaysStateWchanAndStack) {
  KernelWait wait;
  wait.state = 'D';
  wait.wchan = "request_wait_answer";
  wait.stack = parseKernelStack(kFuseFlushStack);
  EXPECT_EQ(describeKernelWait(wait),
            "state D (uninterruptible sleep), wchan request_wait_answer, kernel stack "
            "request_wait_answer <- __fuse_simple_request <- fuse_flush <- filp_close <- "
            "put_files_struct.part.0 <- do_exit");
  wait.stack.clear();
  wait.wchan.clear();
  wait.stack_unreadable = "/proc/7/stack: Permission denied";
  EXPECT_EQ(describeKernelWait(wait),
            "state D (uninterruptible sleep), wchan unknown, kernel stack unreadable "
            "(/proc/7/stack: Permission denied)");
}

TEST(KernelWaitTest, ASleepingChildIsInStateSInNanosleep) {
  SpawnOptions options;
  options.argv = {"sleep", "30"};
  Subprocess child(options);
  KernelWait wait;
  ASSERT_TRUE(test_support::eventually(
      [&] {
        wait = readKernelWait(child.pid());
        return wait.state == 'S' && !wait.wchan.empty();
      },
      5s))
      << "state " << wait.state << ", wchan '" << wait.wchan << "'";
  EXPECT_EQ(commandLineOf(child.pid()), "sleep 30");
  if (::geteuid() == 0) {
    ASSERT_FALSE(wait.stack.empty()) << wait.stack_unreadable;
    EXPECT_TRUE(std::any_of(wait.stack.begin(), wait.stack.end(), [](const std::string& frame) {
      return frame.find("nanosleep") != std::string::npos;
    })) << describeKernelWait(wait);
  } else {
    EXPECT_TRUE(wait.stack.empty());
    EXPECT_NE(wait.stack_unreadable.find("/stack: "), std::string::npos) << wait.stack_unreadable;
  }
  child.stop(1s);
}

TEST(KernelWaitTest, AProcessThatIsGoneReadsAsGone) {
  SpawnOptions options;
  options.argv = {"true"};
  Subprocess child(options);
  const pid_t pid = child.pid();
  child.wait();
  const KernelWait wait = readKernelWait(pid);
  EXPECT_EQ(wait.state, '?');
  EXPECT_TRUE(wait.wchan.empty());
  EXPECT_TRUE(wait.stack.empty());
  EXPECT_EQ(commandLineOf(pid), "");
  EXPECT_EQ(describeState(wait.state), "unknown (the process is gone)");
}

}  // namespace
}  // namespace ddprun::launcher

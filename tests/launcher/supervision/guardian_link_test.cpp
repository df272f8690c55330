// What the agent takes from its guardian's answer about the job's cgroup
// (GuardianLink::jobCgroup): the cgroup the guardian made, adopted; none,
// with the guardian's reason; none, when the guardian ended before it
// answered or the cgroup cannot be opened. The answer is written here as
// the guardian writes it. That a real launch's workers start in it is
// tested with the ddprun binary (process_cleanup_test.cpp).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <memory>
#include <string>

#include "ddprun/launcher/supervision/guardian.hpp"
#include "ddprun/launcher/supervision/worker_cgroup.hpp"

namespace ddprun::launcher {
namespace {

// A link whose guardian has written `answer` and closed its end.
std::unique_ptr<GuardianLink> linkAnswering(const std::string& answer) {
  int pipe_fds[2];
  EXPECT_EQ(pipe2(pipe_fds, O_CLOEXEC), 0);
  EXPECT_EQ(write(pipe_fds[1], answer.data(), answer.size()), static_cast<ssize_t>(answer.size()));
  close(pipe_fds[1]);
  return std::make_unique<GuardianLink>(-1, pipe_fds[0]);
}

ino_t inodeOf(int fd) {
  struct stat info {};
  return fstat(fd, &info) == 0 ? info.st_ino : 0;
}

std::string answerOf(const std::string& parent, const std::string& name,
                     const std::string& description) {
  return parent + std::string(1, '\0') + name + std::string(1, '\0') + description;
}

TEST(GuardianLinkTest, NoCgroupComesWithTheGuardiansReason) {
  std::string description;
  EXPECT_EQ(linkAnswering(answerOf("", "", "no cgroup (DDPRUN_CGROUP=0)"))->jobCgroup(description),
            nullptr);
  EXPECT_EQ(description, "no cgroup (DDPRUN_CGROUP=0)");
}

TEST(GuardianLinkTest, AGuardianThatEndedBeforeItsAnswerMeansNoCgroup) {
  std::string description;
  EXPECT_EQ(linkAnswering("")->jobCgroup(description), nullptr);
  EXPECT_EQ(description, "no cgroup (the guardian ended before it made one)");
  EXPECT_EQ(linkAnswering("/sys/fs/cgroup")->jobCgroup(description), nullptr) << "cut short";
  EXPECT_EQ(description, "no cgroup (the guardian ended before it made one)");
}

TEST(GuardianLinkTest, ACgroupThatCannotBeOpenedIsNoneAndSaysWhy) {
  std::string description;
  EXPECT_EQ(linkAnswering(answerOf("/nonexistent-cgroup-parent", "ddprun-1-2", "cgroups ..."))
                ->jobCgroup(description),
            nullptr);
  EXPECT_EQ(description.rfind("no cgroup (cannot open the cgroup "
                              "/nonexistent-cgroup-parent/ddprun-1-2-0: ",
                              0),
            0u)
      << description;
}

TEST(GuardianLinkTest, TheAgentAdoptsTheCgroupTheGuardianMade) {
  const CgroupSupport support = detectCgroupSupport();
  if (!support.parent) {
    GTEST_SKIP() << "this machine gives ddprun no cgroup: " << support.why_not;
  }
  std::string why_not;
  const auto made = WorkerCgroup::create(*support.parent, why_not);
  ASSERT_NE(made, nullptr) << why_not;
  std::string description;
  const auto adopted =
      linkAnswering(answerOf(made->parent().string(), made->name(), made->describe()))
          ->jobCgroup(description);
  ASSERT_NE(adopted, nullptr) << description;
  EXPECT_EQ(description, made->describe());
  EXPECT_EQ(inodeOf(adopted->attemptFd()), inodeOf(made->attemptFd()))
      << "not the first attempt's cgroup the guardian made";
  EXPECT_TRUE(adopted->remove());
}

}  // namespace
}  // namespace ddprun::launcher

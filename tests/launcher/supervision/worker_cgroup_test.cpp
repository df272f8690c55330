// Finding the agent's cgroup v2 and its mount from /proc's text, and
// DDPRUN_CGROUP=0. Whether a real cgroup is used is tested with the ddprun
// binary (process_cleanup_test.cpp).
#include "ddprun/launcher/supervision/worker_cgroup.hpp"

#include <gtest/gtest.h>

#include <cstdlib>

namespace ddprun::launcher {
namespace {

TEST(DdprunCgroupTest, TheV2PathIsTheZeroLine) {
  EXPECT_EQ(cgroupV2PathIn("12:pids:/job\n1:name=systemd:/x\n0::/user.slice/run-1.scope\n"),
            "/user.slice/run-1.scope");
  EXPECT_EQ(cgroupV2PathIn("0::/\n"), "/");
  EXPECT_FALSE(cgroupV2PathIn("4:memory:/a\n3:cpu:/a\n").has_value()) << "cgroup v1 only";
}

TEST(DdprunCgroupTest, TheMountIsTheFirstCgroup2Line) {
  const std::string mountinfo =
      "30 24 0:26 / /sys/fs/cgroup/memory rw,relatime shared:5 - cgroup cgroup rw,memory\n"
      "35 24 0:31 /lxc/box /sys/fs/cgroup rw,nosuid shared:9 master:1 - cgroup2 cgroup2 rw\n";
  const auto mount = cgroupV2MountIn(mountinfo);
  ASSERT_TRUE(mount.has_value());
  EXPECT_EQ(mount->point, "/sys/fs/cgroup");
  EXPECT_EQ(mount->root, "/lxc/box");
  EXPECT_FALSE(cgroupV2MountIn(mountinfo.substr(0, mountinfo.find('\n') + 1)).has_value());
}

TEST(DdprunCgroupTest, DdprunCgroupZeroTurnsItOff) {
  ASSERT_EQ(setenv("DDPRUN_CGROUP", "0", 1), 0);
  const CgroupSupport support = detectCgroupSupport();
  unsetenv("DDPRUN_CGROUP");
  EXPECT_FALSE(support.parent.has_value());
  EXPECT_EQ(support.why_not, "DDPRUN_CGROUP=0");
}

// What this machine offers, for the record: either a cgroup, or why not.
TEST(DdprunCgroupTest, DetectionGivesAPlaceOrAReason) {
  const CgroupSupport support = detectCgroupSupport();
  EXPECT_NE(support.parent.has_value(), !support.why_not.empty());
  std::cout << "cgroup for the job's workers here: "
            << (support.parent ? support.parent->string() : "none (" + support.why_not + ")")
            << "\n";
}

}  // namespace
}  // namespace ddprun::launcher

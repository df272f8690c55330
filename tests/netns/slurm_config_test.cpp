// The test Slurm cluster's generated configuration and the records it reads
// back: which cgroup plugin a machine's mounts call for, slurm.conf's
// controller, nodes and job-completion log, and Slurm's key=value lines.
#include "slurm_config.hpp"

#include <gtest/gtest.h>

namespace ddprun::netns_test {
namespace {

bool hasLine(const std::string& text, const std::string& line) {
  return ("\n" + text).find("\n" + line + "\n") != std::string::npos;
}

TEST(SlurmConfigTest, CgroupV1ControllersUnderSysFsCgroupMeanV1) {
  const std::string mounts =
      "tmpfs /sys/fs/cgroup tmpfs rw,relatime,mode=755 0 0\n"
      "cgroup /sys/fs/cgroup/cpu cgroup rw,relatime,cpu 0 0\n"
      "cgroup /sys/fs/cgroup/memory cgroup rw,relatime,memory 0 0\n";
  EXPECT_EQ(detectCgroupHierarchy(mounts), CgroupHierarchy::kV1);
  EXPECT_EQ(cgroupConf(CgroupHierarchy::kV1), "CgroupPlugin=cgroup/v1\n");
}

TEST(SlurmConfigTest, AUnifiedMountIsV2AndNoMountIsLeftToSlurm) {
  EXPECT_EQ(detectCgroupHierarchy("cgroup2 /sys/fs/cgroup cgroup2 rw,nosuid 0 0\n"),
            CgroupHierarchy::kV2);
  EXPECT_EQ(cgroupConf(CgroupHierarchy::kV2), "CgroupPlugin=cgroup/v2\n");
  // cgroup2 elsewhere (a hybrid's /sys/fs/cgroup/unified) is not the hierarchy.
  EXPECT_EQ(detectCgroupHierarchy("cgroup2 /sys/fs/cgroup/unified cgroup2 rw 0 0\n"),
            CgroupHierarchy::kNone);
  EXPECT_EQ(detectCgroupHierarchy("proc /proc proc rw 0 0\n"), CgroupHierarchy::kNone);
  EXPECT_EQ(cgroupConf(CgroupHierarchy::kNone), "CgroupPlugin=autodetect\n");
}

TEST(SlurmConfigTest, SlurmConfNamesTheControllerTheNodesAndTheCompletionLog) {
  SlurmClusterConfig config;
  config.cluster_name = "t1";
  config.controller_hostname = "vm";
  config.controller_address = "10.77.0.10";
  config.nodes = {{"h1", "10.77.0.11"}, {"h2", "10.77.0.12"}};
  config.cpus_per_node = 2;
  config.kill_wait_s = 12;
  config.dir = "/tmp/x/slurm";
  config.munge_socket = "/tmp/x/slurm/run/munge.socket";
  const std::string conf = slurmConf(config);
  EXPECT_TRUE(hasLine(conf, "SlurmctldHost=vm(10.77.0.10)")) << conf;
  EXPECT_TRUE(hasLine(conf, "AuthInfo=socket=/tmp/x/slurm/run/munge.socket,cred_expire=10"))
      << conf;
  EXPECT_TRUE(hasLine(conf, "NodeName=h1 NodeAddr=10.77.0.11 CPUs=2 State=UNKNOWN")) << conf;
  EXPECT_TRUE(hasLine(conf, "NodeName=h2 NodeAddr=10.77.0.12 CPUs=2 State=UNKNOWN")) << conf;
  EXPECT_TRUE(hasLine(conf, "PartitionName=test Nodes=h1,h2 Default=YES MaxTime=INFINITE State=UP"))
      << conf;
  EXPECT_TRUE(hasLine(conf, "JobCompLoc=/tmp/x/slurm/jobcomp.log")) << conf;
  EXPECT_TRUE(hasLine(conf, "SlurmdSpoolDir=/tmp/x/slurm/spool/%n")) << conf;
  EXPECT_TRUE(hasLine(conf, "KillWait=12")) << conf;
  EXPECT_TRUE(hasLine(conf, "ProctrackType=proctrack/linuxproc")) << conf;
  EXPECT_EQ(spoolDir(config, "h2"), "/tmp/x/slurm/spool/h2");
}

TEST(SlurmConfigTest, ARecordIsItsKeyValueTokens) {
  const SlurmRecord record = parseSlurmRecord(
      "JobId=3 UserId=root(0) Name=train.sbatch JobState=CANCELLED ExitCode=0:15 Extra \n");
  EXPECT_EQ(record.at("JobId"), "3");
  EXPECT_EQ(record.at("UserId"), "root(0)");
  EXPECT_EQ(record.at("JobState"), "CANCELLED");
  EXPECT_EQ(record.at("ExitCode"), "0:15");
  EXPECT_EQ(record.count("Extra"), 0u);
  EXPECT_TRUE(parseSlurmRecord("").empty());
}

}  // namespace
}  // namespace ddprun::netns_test

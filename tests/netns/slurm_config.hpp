// What a test Slurm cluster is made of, as text: its slurm.conf and
// cgroup.conf, which cgroup hierarchy the machine mounts, and the key=value
// records Slurm prints (`scontrol show job -o`, the jobcomp/filetxt log).
// Pure functions; safe on any thread.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace ddprun::netns_test {

struct SlurmNode {
  std::string name;     // NodeName, and `slurmd -N`; the lab's host name
  std::string address;  // NodeAddr: its namespace's address
};

struct SlurmClusterConfig {
  std::string cluster_name;
  // SlurmctldHost=<hostname>(<address>): namespaces share the machine's host
  // name, so the controller is that name, reached at its namespace's address.
  std::string controller_hostname;
  std::string controller_address;
  std::vector<SlurmNode> nodes;
  int cpus_per_node = 2;
  // Seconds between the SIGTERM of a cancelled job and its SIGKILL (Slurm's
  // default is 30).
  int kill_wait_s = 30;
  // Seconds a job credential is valid; a requeued job waits this long (and
  // a second) before it may start again, for every node to forget the old one.
  int credential_lifetime_s = 10;
  std::filesystem::path dir;           // state/, spool/<node>/, log/, run/, jobcomp.log
  std::filesystem::path munge_socket;  // munged's, in AuthInfo
};

// The directories the configuration names, each a child of `config.dir`.
std::filesystem::path stateDir(const SlurmClusterConfig& config);
std::filesystem::path spoolDir(const SlurmClusterConfig& config, const std::string& node);
std::filesystem::path logDir(const SlurmClusterConfig& config);
std::filesystem::path jobCompletionLog(const SlurmClusterConfig& config);

std::string slurmConf(const SlurmClusterConfig& config);

enum class CgroupHierarchy { kV1, kV2, kNone };

// The hierarchy mounted at /sys/fs/cgroup, from /proc/self/mounts' text:
// kV2 for a cgroup2 mount there, kV1 for cgroup (v1) controllers under it
// (a hybrid machine counts as v1: Slurm's v1 plugin uses those), else kNone.
CgroupHierarchy detectCgroupHierarchy(const std::string& mounts);

// cgroup.conf for that hierarchy: CgroupPlugin=cgroup/v1 or cgroup/v2 (and
// autodetect where none is mounted). No cgroup feature is enabled: the
// cluster tracks processes with proctrack/linuxproc and binds no task.
std::string cgroupConf(CgroupHierarchy hierarchy);

// One of Slurm's records: key to value.
using SlurmRecord = std::map<std::string, std::string>;

// "JobId=3 JobState=CANCELLED ExitCode=0:15 ..." as a map. Values have no
// blanks in these tests' jobs (names, paths); a token without '=' is skipped.
SlurmRecord parseSlurmRecord(const std::string& line);

}  // namespace ddprun::netns_test

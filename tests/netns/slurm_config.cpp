#include "slurm_config.hpp"

#include <sstream>

namespace ddprun::netns_test {

namespace fs = std::filesystem;

fs::path stateDir(const SlurmClusterConfig& config) { return config.dir / "state"; }

fs::path spoolDir(const SlurmClusterConfig& config, const std::string& node) {
  return config.dir / "spool" / node;
}

fs::path logDir(const SlurmClusterConfig& config) { return config.dir / "log"; }

fs::path jobCompletionLog(const SlurmClusterConfig& config) { return config.dir / "jobcomp.log"; }

std::string slurmConf(const SlurmClusterConfig& config) {
  const std::string dir = config.dir.string();
  std::ostringstream conf;
  conf << "# Generated for one test: every path is in the test's own directory.\n"
       << "ClusterName=" << config.cluster_name << "\n"
       << "SlurmctldHost=" << config.controller_hostname << "(" << config.controller_address
       << ")\n"
       << "AuthType=auth/munge\n"
       << "CredType=cred/munge\n"
       // cred_expire: how long a job's credential stays valid, and so how
       // long Slurm holds a requeued job back (120 s by default).
       << "AuthInfo=socket=" << config.munge_socket.string()
       << ",cred_expire=" << config.credential_lifetime_s << "\n"
       << "SlurmUser=root\n"
       << "SlurmdUser=root\n"
       << "StateSaveLocation=" << stateDir(config).string()
       << "\n"
       // %n: one slurmd per node on one machine, each with its own spool and log.
       << "SlurmdSpoolDir=" << (config.dir / "spool" / "%n").string() << "\n"
       << "SlurmctldPidFile=" << dir << "/run/slurmctld.pid\n"
       << "SlurmdPidFile=" << dir << "/run/slurmd.%n.pid\n"
       << "SlurmctldLogFile=" << (logDir(config) / "slurmctld.log").string() << "\n"
       << "SlurmdLogFile=" << (logDir(config) / "slurmd.%n.log").string()
       << "\n"
       // Namespaces share the machine's cgroups and the test needs no limits:
       // processes are tracked by their parent pids, tasks are not bound.
       << "ProctrackType=proctrack/linuxproc\n"
       << "TaskPlugin=task/none\n"
       << "MpiDefault=none\n"
       << "MailProg=/bin/true\n"
       // No slurmdbd here: every finished (or requeued) job gets a line with
       // its state and exit code in this file.
       << "JobCompType=jobcomp/filetxt\n"
       << "JobCompLoc=" << jobCompletionLog(config).string() << "\n"
       << "SchedulerType=sched/builtin\n"
       // A job held back (a requeued one, until its old credential expires)
       // is started by the periodic pass, every 60 s by default.
       << "SchedulerParameters=sched_interval=2\n"
       << "SelectType=select/cons_tres\n"
       << "SelectTypeParameters=CR_CPU\n"
       << "ReturnToService=2\n"
       << "KillWait=" << config.kill_wait_s << "\n"
       << "MessageTimeout=10\n"
       << "InactiveLimit=0\n"
       << "SlurmctldDebug=info\n"
       << "SlurmdDebug=info\n";
  std::string names;
  for (const SlurmNode& node : config.nodes) {
    conf << "NodeName=" << node.name << " NodeAddr=" << node.address
         << " CPUs=" << config.cpus_per_node << " State=UNKNOWN\n";
    names += (names.empty() ? "" : ",") + node.name;
  }
  conf << "PartitionName=test Nodes=" << names << " Default=YES MaxTime=INFINITE State=UP\n";
  return conf.str();
}

CgroupHierarchy detectCgroupHierarchy(const std::string& mounts) {
  std::istringstream lines(mounts);
  bool v1 = false;
  for (std::string line; std::getline(lines, line);) {
    std::istringstream fields(line);
    std::string device, mount_point, type;
    fields >> device >> mount_point >> type;
    if (type == "cgroup2" && mount_point == "/sys/fs/cgroup") {
      return CgroupHierarchy::kV2;
    }
    if (type == "cgroup" && mount_point.rfind("/sys/fs/cgroup/", 0) == 0) {
      v1 = true;
    }
  }
  return v1 ? CgroupHierarchy::kV1 : CgroupHierarchy::kNone;
}

std::string cgroupConf(CgroupHierarchy hierarchy) {
  switch (hierarchy) {
    case CgroupHierarchy::kV1:
      return "CgroupPlugin=cgroup/v1\n";
    case CgroupHierarchy::kV2:
      return "CgroupPlugin=cgroup/v2\n";
    case CgroupHierarchy::kNone:
      break;
  }
  return "CgroupPlugin=autodetect\n";
}

SlurmRecord parseSlurmRecord(const std::string& line) {
  SlurmRecord record;
  std::istringstream tokens(line);
  for (std::string token; tokens >> token;) {
    const auto equals = token.find('=');
    if (equals != std::string::npos && equals > 0) {
      record[token.substr(0, equals)] = token.substr(equals + 1);
    }
  }
  return record;
}

}  // namespace ddprun::netns_test

// SlurmCluster: a real Slurm cluster on a NetLab, started for one test (or
// one benchmark) and torn down after it. It owns, in `dir`:
//   - a munge key it generates (mungekey) and the munged that serves it, on
//     a socket in `dir` that slurm.conf names (AuthInfo=socket=...);
//   - a generated slurm.conf and cgroup.conf (slurm_config.hpp);
//   - slurmctld on the controller's host and one `slurmd -N <node>` per
//     compute host, each in its host's network namespace, every state,
//     spool and log directory in `dir`.
// Daemons run as root in the foreground, children of this process (killed
// with it). Slurm's client commands (sbatch, scontrol, scancel, squeue, sinfo)
// are run in the controller's namespace, the only one with a route to it
// besides the compute hosts, with SLURM_CONF set: a batch job inherits the
// submitter's environment, so its own `scontrol` and `srun` find the cluster.
//
// The constructor returns once every node is idle (polled with a deadline);
// it throws std::runtime_error naming a missing program (the Debian packages
// to install) or a daemon that did not come up, with the daemons' logs. The
// destructor (or stop()) cancels every job, waits for them to end, stops the
// daemons and kills whatever is left in the hosts' namespaces. Needs root.
// Used by one thread.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "ddprun/launcher/process/subprocess.hpp"
#include "netns_lab.hpp"
#include "slurm_config.hpp"

namespace ddprun::netns_test {

struct SlurmLayout {
  std::string controller = "h0";                  // a host of the lab
  std::vector<std::string> nodes = {"h1", "h2"};  // hosts of the lab, one slurmd each
  int cpus_per_node = 2;
  int kill_wait_s = 30;
  // Each slurmd, and so each job step on its node, in a UTS namespace of
  // its own with the node's name as host name (and so a host name that
  // resolves to the node's address), as on a real cluster. Otherwise every
  // host keeps the machine's host name, which resolves to loopback.
  bool own_hostnames = false;
};

// A process found on a host: its pid and command line, for messages.
struct HostProcess {
  pid_t pid = 0;
  std::string command;
};

class SlurmCluster {
 public:
  // `dir` must exist; it is made traversable by everyone (munged refuses a
  // socket under a directory others cannot search).
  SlurmCluster(const NetLab& lab, SlurmLayout layout, std::filesystem::path dir);
  ~SlurmCluster();
  SlurmCluster(const SlurmCluster&) = delete;
  SlurmCluster& operator=(const SlurmCluster&) = delete;

  const std::filesystem::path& confPath() const { return conf_path_; }
  const SlurmLayout& layout() const { return layout_; }
  // PATH and SLURM_CONF, for a Slurm client.
  Variables clientEnvironment() const;

  // A Slurm client command in the controller's namespace, with
  // clientEnvironment() then `env` (a later PATH replaces the first).
  CommandResult client(const std::vector<std::string>& argv, const Variables& env = {},
                       std::chrono::milliseconds timeout = std::chrono::seconds(30)) const;

  // sbatch --parsable <args>, run with `env` (which the job inherits);
  // returns the job id. Throws std::runtime_error with sbatch's output.
  int submit(const std::vector<std::string>& sbatch_args, const Variables& env) const;

  // `scontrol show job -o <job>`; empty once Slurm no longer knows it.
  SlurmRecord showJob(int job) const;
  // The job's last line in the jobcomp log (a requeue writes one too).
  std::optional<SlurmRecord> completion(int job) const;
  // Polls showJob() until JobState is one of `states`; the last record
  // (its JobState tells whether it got there).
  SlurmRecord awaitJobState(int job, const std::set<std::string>& states,
                            std::chrono::milliseconds timeout) const;
  // Polls until no job is queued and every node is idle (a job that ended
  // may hold its nodes a moment longer, completing); false on timeout.
  bool awaitIdle(std::chrono::milliseconds timeout) const;
  // scontrol requeue: the job is stopped and queued again under its id; it
  // starts again once its old credential has expired (cred_expire, 10 s).
  void requeue(int job) const;

  // Every process on `host` (its namespace) but the cluster's daemons.
  std::vector<HostProcess> jobProcesses(const std::string& host) const;
  // The processes stop() had to kill: none when every job ended cleanly.
  const std::vector<HostProcess>& leftovers() const { return leftovers_; }

  // The tail of every daemon's log, for failure messages.
  std::string diagnostics() const;

  // Cancels every job and waits for them to end (up to KillWait and a
  // margin), stops the daemons, kills what is left on every host.
  // Idempotent; never throws.
  void stop() noexcept;

 private:
  void requirePrograms() const;
  void writeConfiguration();
  void startMunge();
  void startController();
  void startNodes();
  launcher::Subprocess startDaemon(const std::string& host, const std::string& name,
                                   const std::vector<std::string>& argv) const;
  void expectRunning(const launcher::Subprocess& daemon, const std::string& name) const;
  // sinfo's "<node> <state>" lines, and how many nodes are idle.
  std::size_t idleNodes(std::string& states) const;
  void cancelEveryJob() noexcept;
  void killWhatIsLeft() noexcept;
  std::vector<pid_t> daemonPids() const;

  const NetLab& lab_;
  SlurmLayout layout_;
  SlurmClusterConfig config_;
  std::filesystem::path conf_path_;
  std::optional<launcher::Subprocess> munged_;
  std::optional<launcher::Subprocess> slurmctld_;
  std::vector<launcher::Subprocess> slurmds_;
  std::vector<HostProcess> leftovers_;
  bool stopped_ = false;
};

// The Slurm and munge programs the cluster runs, missing from this machine;
// empty when all are there.
std::vector<std::string> missingSlurmPrograms();

}  // namespace ddprun::netns_test

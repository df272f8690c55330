#include "slurm_cluster.hpp"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "ddprun/test_support/eventually.hpp"
#include "ddprun/test_support/files.hpp"

namespace ddprun::netns_test {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

constexpr const char* kPrograms[] = {"mungekey",   "munged", "slurmctld", "slurmd",
                                     "slurmstepd", "sbatch", "srun",      "scontrol",
                                     "scancel",    "squeue", "sinfo"};

std::string findProgram(const std::string& name) {
  std::istringstream dirs(kChildPath);
  for (std::string dir; std::getline(dirs, dir, ':');) {
    const fs::path candidate = fs::path(dir) / name;
    if (::access(candidate.c_str(), X_OK) == 0) {
      return candidate.string();
    }
  }
  return "";
}

std::string machineHostname() {
  char name[256] = {};
  ::gethostname(name, sizeof(name) - 1);
  return name;
}

std::string commandLineOf(pid_t pid) {
  std::string text = test_support::readFile("/proc/" + std::to_string(pid) + "/cmdline");
  std::replace(text.begin(), text.end(), '\0', ' ');
  return text;
}

// The last `lines` lines of a file, under a header naming it.
std::string tailOf(const fs::path& file, std::size_t lines) {
  const std::string text = test_support::readFile(file);
  std::size_t start = text.size();
  for (std::size_t seen = 0; start > 0 && seen <= lines;) {
    if (text[--start] == '\n') {
      ++seen;
    }
  }
  return "\n===== " + file.filename().string() + " =====\n" + text.substr(start);
}

}  // namespace

std::vector<std::string> missingSlurmPrograms() {
  std::vector<std::string> missing;
  for (const char* program : kPrograms) {
    if (findProgram(program).empty()) {
      missing.push_back(program);
    }
  }
  return missing;
}

SlurmCluster::SlurmCluster(const NetLab& lab, SlurmLayout layout, fs::path dir)
    : lab_(lab), layout_(std::move(layout)) {
  requirePrograms();
  config_.cluster_name = "ddprun" + std::to_string(::getpid());
  config_.controller_hostname = machineHostname();
  config_.controller_address = lab.address(layout_.controller);
  for (const std::string& node : layout_.nodes) {
    config_.nodes.push_back({node, lab.address(node)});
  }
  config_.cpus_per_node = layout_.cpus_per_node;
  config_.kill_wait_s = layout_.kill_wait_s;
  config_.dir = dir / "slurm";
  config_.munge_socket = config_.dir / "run" / "munge.socket";
  fs::permissions(dir, fs::perms::group_exec | fs::perms::others_exec, fs::perm_options::add);
  try {
    writeConfiguration();
    startMunge();
    startController();
    startNodes();
  } catch (...) {
    stop();
    throw;
  }
}

SlurmCluster::~SlurmCluster() { stop(); }

void SlurmCluster::requirePrograms() const {
  const std::vector<std::string> missing = missingSlurmPrograms();
  if (missing.empty()) {
    return;
  }
  std::string names;
  for (const std::string& name : missing) {
    names += (names.empty() ? "" : ", ") + name;
  }
  throw std::runtime_error("the Slurm cluster needs " + names + ", not found in " + kChildPath +
                           ": install Debian's slurmctld, slurmd, slurm-client and munge "
                           "(deploy/install-deps.sh does)");
}

void SlurmCluster::writeConfiguration() {
  fs::create_directories(config_.dir);
  // munged checks that everyone can search the path to its socket, and that
  // nobody but its user can reach its key.
  fs::create_directories(config_.dir / "run");
  fs::permissions(config_.dir,
                  fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec);
  fs::permissions(config_.dir / "run", fs::perms::owner_all | fs::perms::group_read |
                                           fs::perms::group_exec | fs::perms::others_read |
                                           fs::perms::others_exec);
  fs::create_directories(config_.dir / "munge");
  fs::permissions(config_.dir / "munge", fs::perms::owner_all);
  fs::create_directories(stateDir(config_));
  fs::create_directories(logDir(config_));
  for (const SlurmNode& node : config_.nodes) {
    fs::create_directories(spoolDir(config_, node.name));
  }
  conf_path_ = config_.dir / "slurm.conf";
  std::ofstream(conf_path_) << slurmConf(config_);
  // slurmd and slurmstepd read cgroup.conf next to slurm.conf.
  std::ofstream(config_.dir / "cgroup.conf")
      << cgroupConf(detectCgroupHierarchy(test_support::readFile("/proc/self/mounts")));
}

void SlurmCluster::startMunge() {
  const fs::path key = config_.dir / "munge" / "munge.key";
  const CommandResult created = runCommand({"mungekey", "--create", "--keyfile=" + key.string()});
  if (created.code != 0) {
    throw std::runtime_error("mungekey --create failed (exit " + std::to_string(created.code) +
                             "): " + created.output);
  }
  munged_.emplace(startDaemon(
      layout_.controller, "munged",
      {"munged", "--foreground", "--socket=" + config_.munge_socket.string(),
       "--key-file=" + key.string(), "--pid-file=" + (config_.dir / "run" / "munged.pid").string(),
       "--log-file=" + (logDir(config_) / "munged.log").string(),
       "--seed-file=" + (config_.dir / "munge" / "munged.seed").string()}));
  const bool listening = test_support::eventually(
      [&] { return fs::exists(config_.munge_socket) || munged_->tryWait().has_value(); }, 10s,
      10ms);
  expectRunning(*munged_, "munged");
  if (!listening) {
    throw std::runtime_error("munged made no socket within 10 s" + diagnostics());
  }
}

void SlurmCluster::startController() {
  slurmctld_.emplace(
      startDaemon(layout_.controller, "slurmctld", {"slurmctld", "-D", "-f", conf_path_.string()}));
  const bool up = test_support::eventually(
      [&] {
        return slurmctld_->tryWait().has_value() ||
               client({"scontrol", "ping"}).output.find("is UP") != std::string::npos;
      },
      30s, 50ms);
  expectRunning(*slurmctld_, "slurmctld");
  if (!up) {
    throw std::runtime_error("slurmctld did not answer `scontrol ping` within 30 s" +
                             diagnostics());
  }
}

void SlurmCluster::startNodes() {
  for (const SlurmNode& node : config_.nodes) {
    std::vector<std::string> argv = {findProgram("slurmd"), "-D", "-N", node.name, "-f",
                                     conf_path_.string()};
    if (layout_.own_hostnames) {
      // unshare(1) execs the shell, which names the host and execs slurmd:
      // one pid throughout, the daemon's.
      argv.insert(argv.begin(), {"unshare", "--uts", "--", findProgram("sh"), "-c",
                                 "hostname \"$0\" && exec \"$@\"", node.name});
    }
    slurmds_.push_back(startDaemon(node.name, "slurmd." + node.name, argv));
  }
  std::string states;
  const bool idle = test_support::eventually(
      [&] {
        for (launcher::Subprocess& slurmd : slurmds_) {
          if (slurmd.tryWait()) {
            return true;
          }
        }
        return idleNodes(states) == config_.nodes.size();
      },
      30s, 50ms);
  for (std::size_t i = 0; i < slurmds_.size(); ++i) {
    expectRunning(slurmds_[i], "slurmd -N " + config_.nodes[i].name);
  }
  if (!idle) {
    throw std::runtime_error("the nodes were not all idle within 30 s (sinfo: " + states + ")" +
                             diagnostics());
  }
}

std::size_t SlurmCluster::idleNodes(std::string& states) const {
  states = client({"sinfo", "-h", "-N", "-o", "%N %T"}).output;
  std::istringstream lines(states);
  std::size_t idle = 0;
  for (std::string name, state; lines >> name >> state;) {
    idle += state == "idle" ? 1 : 0;
  }
  return idle;
}

bool SlurmCluster::awaitIdle(std::chrono::milliseconds timeout) const {
  return test_support::eventually(
      [&] {
        const CommandResult queue = client({"squeue", "-h", "-o", "%i"});
        std::string states;
        return queue.code == 0 && queue.output.find_first_not_of(" \n") == std::string::npos &&
               idleNodes(states) == config_.nodes.size();
      },
      timeout, 20ms);
}

launcher::Subprocess SlurmCluster::startDaemon(const std::string& host, const std::string& name,
                                               const std::vector<std::string>& argv) const {
  launcher::SpawnOptions options;
  std::vector<std::string> full = argv;
  if (full.front().find('/') == std::string::npos) {
    full.front() = findProgram(full.front());
  }
  options.argv = lab_.onHost(host, full);
  options.env = clientEnvironment();
  const fs::path log = logDir(config_) / (name + ".out");
  const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  options.stdout_fd = fd;
  options.stderr_fd = fd;
  launcher::Subprocess daemon(options);
  ::close(fd);
  return daemon;
}

void SlurmCluster::expectRunning(const launcher::Subprocess& daemon,
                                 const std::string& name) const {
  if (const auto status = daemon.exitStatus()) {
    throw std::runtime_error(name + " " + status->describe() + " while starting" + diagnostics());
  }
}

Variables SlurmCluster::clientEnvironment() const {
  return {{"PATH", kChildPath}, {"SLURM_CONF", conf_path_.string()}};
}

CommandResult SlurmCluster::client(const std::vector<std::string>& argv, const Variables& env,
                                   std::chrono::milliseconds timeout) const {
  Variables full = clientEnvironment();
  full.insert(full.end(), env.begin(), env.end());
  return runCommand(lab_.onHost(layout_.controller, argv), timeout, full);
}

int SlurmCluster::submit(const std::vector<std::string>& sbatch_args, const Variables& env) const {
  std::vector<std::string> argv = {"sbatch", "--parsable"};
  argv.insert(argv.end(), sbatch_args.begin(), sbatch_args.end());
  const CommandResult result = client(argv, env);
  int job = 0;
  if (result.code != 0 || std::sscanf(result.output.c_str(), "%d", &job) != 1) {
    throw std::runtime_error("sbatch failed (exit " + std::to_string(result.code) +
                             "): " + result.output);
  }
  return job;
}

SlurmRecord SlurmCluster::showJob(int job) const {
  const CommandResult shown = client({"scontrol", "show", "job", "-o", std::to_string(job)});
  return shown.code == 0 ? parseSlurmRecord(shown.output) : SlurmRecord{};
}

std::optional<SlurmRecord> SlurmCluster::completion(int job) const {
  std::istringstream lines(test_support::readFile(jobCompletionLog(config_)));
  std::optional<SlurmRecord> last;
  const std::string key = "JobId=" + std::to_string(job) + " ";
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(key, 0) == 0) {
      last = parseSlurmRecord(line);
    }
  }
  return last;
}

SlurmRecord SlurmCluster::awaitJobState(int job, const std::set<std::string>& states,
                                        std::chrono::milliseconds timeout) const {
  SlurmRecord record;
  test_support::eventually(
      [&] {
        record = showJob(job);
        return states.count(record["JobState"]) != 0;
      },
      timeout, 100ms);
  return record;
}

void SlurmCluster::requeue(int job) const {
  const CommandResult requeued = client({"scontrol", "requeue", std::to_string(job)});
  if (requeued.code != 0) {
    throw std::runtime_error("scontrol requeue " + std::to_string(job) +
                             " failed: " + requeued.output);
  }
}

std::vector<pid_t> SlurmCluster::daemonPids() const {
  std::vector<pid_t> pids;
  for (const auto* daemon : {&munged_, &slurmctld_}) {
    if (*daemon) {
      pids.push_back((*daemon)->pid());
    }
  }
  for (const launcher::Subprocess& slurmd : slurmds_) {
    pids.push_back(slurmd.pid());
  }
  return pids;
}

std::vector<HostProcess> SlurmCluster::jobProcesses(const std::string& host) const {
  const std::vector<pid_t> daemons = daemonPids();
  std::istringstream pids(runCommand({ipBinary(), "netns", "pids", lab_.namespaceOf(host)}).output);
  std::vector<HostProcess> found;
  for (pid_t pid = 0; pids >> pid;) {
    if (std::find(daemons.begin(), daemons.end(), pid) == daemons.end()) {
      found.push_back({pid, commandLineOf(pid)});
    }
  }
  return found;
}

std::string SlurmCluster::diagnostics() const {
  std::string text;
  std::error_code ignored;
  for (const auto& entry : fs::directory_iterator(logDir(config_), ignored)) {
    text += tailOf(entry.path(), 40);
  }
  return text;
}

void SlurmCluster::stop() noexcept {
  if (stopped_) {
    return;
  }
  stopped_ = true;
  cancelEveryJob();
  for (launcher::Subprocess& slurmd : slurmds_) {
    slurmd.stop(10s);
  }
  for (auto* daemon : {&slurmctld_, &munged_}) {
    if (*daemon) {
      (*daemon)->stop(10s);
    }
  }
  killWhatIsLeft();
}

// Every job cancelled, and gone from the queue: each job's processes get
// SIGTERM, then SIGKILL after KillWait.
void SlurmCluster::cancelEveryJob() noexcept {
  if (!slurmctld_ || slurmctld_->exitStatus()) {
    return;
  }
  try {
    client({"scancel", "--user=root"});
    test_support::eventually(
        [&] {
          const CommandResult queue = client({"squeue", "-h", "-o", "%i"});
          return queue.code != 0 || queue.output.find_first_not_of(" \n") == std::string::npos;
        },
        std::chrono::seconds(layout_.kill_wait_s + 15), 100ms);
  } catch (...) {
    // Whatever is still running is killed below.
  }
}

void SlurmCluster::killWhatIsLeft() noexcept {
  std::vector<std::string> hosts = layout_.nodes;
  hosts.push_back(layout_.controller);
  for (const std::string& host : hosts) {
    try {
      for (const HostProcess& process : jobProcesses(host)) {
        ::kill(process.pid, SIGKILL);
        leftovers_.push_back(process);
      }
    } catch (...) {
      // The lab's destructor deletes the namespace; a later lab kills what is in it.
    }
  }
}

}  // namespace ddprun::netns_test

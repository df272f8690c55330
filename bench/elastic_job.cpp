// ElasticJob: the agents of one rdzv_bench run, their daemon, and the waits
// on their logs and their workers' stamps (see elastic_job.hpp).
#include "elastic_job.hpp"

#include <signal.h>
#include <sys/wait.h>

#include <fstream>
#include <iterator>
#include <thread>

#include "ddprun/test_support/files.hpp"
#include "ddprun/test_support/port_file.hpp"
#include "ddprun/test_support/temp_dir.hpp"

namespace ddprun::bench {
namespace {

namespace fs = std::filesystem;
using Clock = ElasticJob::Clock;

// What each launcher logs once it enters the rendezvous: ddprun after its
// join request went out (c10d) or its lease and member key were written
// (etcd), torchrun (at LOGLEVEL=INFO) just before its first
// sync of the rendezvous state. Either is followed by the join within
// milliseconds, while the next agent needs longer than that to start.
constexpr const char* kDdprunJoined = "joined rendezvous";
constexpr const char* kDdprunEtcdJoined = "joined the etcd rendezvous";
constexpr const char* kTorchrunJoining = "Rendezvous'ing worker group";

// How often the waits look again. The figures come from the workers' own
// stamps, so this sets only how much CPU the waiting takes, not precision.
constexpr auto kPollPeriod = std::chrono::milliseconds(2);

// Agents get this long between SIGTERM and SIGKILL when a job is stopped:
// torchrun's agents stop their workers and close their stores first.
constexpr auto kStopGrace = std::chrono::seconds(10);

bool fileContains(const fs::path& path, const char* text) {
  std::ifstream in(path);
  const std::string content{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  return content.find(text) != std::string::npos;
}

std::optional<WorkerStamp> readStamp(const fs::path& path) {
  std::ifstream in(path);
  WorkerStamp stamp;
  if (in >> stamp.entered_ns >> stamp.restart_count >> stamp.world_size) {
    return stamp;
  }
  return std::nullopt;
}

// The whole directory, copied where it outlives the benchmark's scratch
// directory; empty if that fails too.
fs::path keepCopy(const fs::path& dir) try {
  test_support::TempDir kept("rdzv_bench-failed");
  std::error_code error;
  fs::copy(dir, kept.path(), fs::copy_options::recursive, error);
  return error ? fs::path() : kept.keep();
} catch (const std::exception&) {
  return {};
}

}  // namespace

const char* nameOf(Launcher launcher) {
  switch (launcher) {
    case Launcher::Ddprun:
      return "ddprun";
    case Launcher::DdprunEtcd:
      return "ddprun-etcd";
    case Launcher::Torchrun:
      return "torchrun";
  }
  return "?";
}

ElasticJob::ElasticJob(const ElasticPrograms& programs, ElasticJobSpec spec,
                       Clock::time_point deadline)
    : programs_(programs), spec_(std::move(spec)), deadline_(deadline) {
  if (spec_.launcher == Launcher::Torchrun) {
    port_ = test_support::freeLoopbackPort();  // agent 0 binds it (is_host=1)
    return;
  }
  if (spec_.launcher == Launcher::DdprunEtcd) {
    if (programs_.etcd_endpoints.empty()) {
      throw std::logic_error("ddprun-etcd run without an etcd cluster");
    }
    return;  // the cluster outlives the job; its run id keeps its keys apart
  }
  const fs::path port_file = spec_.dir / "ddprund.port";
  LaunchSpec daemon;
  daemon.argv = {programs_.ddprund, "--port", "0", "--port-file", port_file.string()};
  daemon.env = programs_.base_env;
  daemon.log = spec_.dir / "ddprund.log";
  daemon_.emplace(startLogged(daemon).process);
  const auto port = test_support::waitForPortFile(
      port_file, *daemon_, std::chrono::ceil<std::chrono::milliseconds>(deadline_ - Clock::now()));
  if (!port) {
    fail("ddprund never wrote its port (" + describeStatus(*daemon_) + ")", daemon.log);
  }
  port_ = *port;
}

ElasticJob::~ElasticJob() { stopAll(); }

fs::path ElasticJob::agentLog(int index) const {
  return spec_.dir / ("agent." + std::to_string(index) + ".log");
}

std::vector<std::string> ElasticJob::agentArgv(int index) const {
  const std::string nodes =
      spec_.min_nodes == spec_.max_nodes
          ? std::to_string(spec_.max_nodes)
          : std::to_string(spec_.min_nodes) + ":" + std::to_string(spec_.max_nodes);
  const std::string endpoint = "127.0.0.1:" + std::to_string(port_);
  const std::string run_id = "rdzv_bench_" + spec_.dir.filename().string();
  std::vector<std::string> argv;
  if (spec_.launcher == Launcher::Ddprun) {
    argv = {programs_.ddprun, "--nnodes", nodes, "--nproc-per-node", "1", "--max-restarts", "3"};
    argv.insert(argv.end(), {"--rdzv-backend", "c10d", "--rdzv-endpoint", endpoint});
    // is_host=0: the external ddprund serves the endpoint, no agent tries to.
    argv.insert(argv.end(), {"--rdzv-id", run_id, "--rdzv-conf", "is_host=0", "--no-python"});
  } else if (spec_.launcher == Launcher::DdprunEtcd) {
    argv = {programs_.ddprun, "--nnodes", nodes, "--nproc-per-node", "1", "--max-restarts", "3"};
    argv.insert(argv.end(), {"--rdzv-backend", "etcd-v3", "--rdzv-endpoint",
                             programs_.etcd_endpoints, "--rdzv-id", run_id});
    argv.insert(argv.end(),
                {"--rdzv-conf",
                 "keep_alive_interval=" + std::to_string(kEtcdKeepAliveIntervalS) +
                     ",keep_alive_max_attempt=" + std::to_string(kEtcdKeepAliveMaxAttempt),
                 "--no-python"});
  } else {
    argv = {programs_.python, "-m", "torch.distributed.run", "--nnodes", nodes};
    argv.insert(argv.end(), {"--nproc_per_node", "1", "--max_restarts", "3"});
    argv.insert(argv.end(), {"--rdzv_backend", "c10d", "--rdzv_endpoint", endpoint});
    // Agent 0 hosts the c10d store on the endpoint.
    argv.insert(argv.end(),
                {"--rdzv_id", run_id, "--rdzv_conf", index == 0 ? "is_host=1" : "is_host=0"});
    // Debian's 1.13 crashes at start without -r/-t; 0.1 s is torchrun 2.x's
    // default monitor interval (1.13's is 5 s).
    argv.insert(argv.end(), {"--monitor_interval", "0.1", "-r", "9:1", "-t", "9:1"});
    argv.push_back("--no_python");
  }
  argv.insert(argv.end(), {programs_.worker, "rdzv"});
  return argv;
}

Clock::time_point ElasticJob::startAgent() {
  const int index = static_cast<int>(agents_.size());
  if (index >= spec_.max_nodes) {
    throw std::logic_error("more agents than --nnodes allows");
  }
  LaunchSpec agent;
  agent.argv = agentArgv(index);
  agent.env = programs_.base_env;
  agent.env.emplace_back("LAUNCH_BENCH_DIR", spec_.dir.string());
  agent.env.emplace_back("TMPDIR", spec_.dir.string());  // the launchers' log dirs go with it
  if (spec_.launcher == Launcher::Torchrun) {
    agent.env.emplace_back("LOGLEVEL", "INFO");  // its default, WARNING, hides kTorchrunJoining
  }
  if (spec_.hold_s > 0) {
    agent.env.emplace_back("LAUNCH_BENCH_HOLD_S", std::to_string(spec_.hold_s));
  }
  agent.log = agentLog(index);
  StartedChild started = startLogged(agent);
  agents_.push_back(std::move(started.process));
  joined_.push_back(false);
  return started.started;
}

std::optional<int> ElasticJob::exitedAgent() {
  for (;;) {
    siginfo_t info{};
    // WNOWAIT: only look; the Subprocess that owns the child reaps it.
    if (::waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT) != 0 || info.si_pid == 0) {
      return std::nullopt;
    }
    if (daemon_ && info.si_pid == daemon_->pid()) {
      daemon_->waitFor(std::chrono::seconds(1));
      fail("ddprund exited mid-run (" + describeStatus(*daemon_) + ")", spec_.dir / "ddprund.log");
    }
    bool ours = false;
    for (std::size_t index = 0; index < agents_.size(); ++index) {
      if (agents_[index].pid() == info.si_pid) {
        agents_[index].waitFor(std::chrono::seconds(1));
        if (static_cast<int>(index) != killed_) {
          return static_cast<int>(index);
        }
        ours = true;  // the agent we killed: look again
      }
    }
    if (!ours) {
      ::waitpid(info.si_pid, nullptr, 0);  // not this job's: a stray, so it cannot block the look
    }
  }
}

void ElasticJob::waitJoined(int count) {
  const char* marker = spec_.launcher == Launcher::Ddprun       ? kDdprunJoined
                       : spec_.launcher == Launcher::DdprunEtcd ? kDdprunEtcdJoined
                                                                : kTorchrunJoining;
  for (int index = 0; index < count;) {
    if (!joined_[index] && fileContains(agentLog(index), marker)) {
      joined_[index] = true;
    }
    if (joined_[index]) {
      ++index;
      continue;
    }
    if (const auto exited = exitedAgent()) {
      fail("agent " + std::to_string(*exited) + " exited (" + describeStatus(agents_[*exited]) +
               ") before every agent joined",
           agentLog(*exited));
    }
    if (Clock::now() > deadline_) {
      fail("agent " + std::to_string(index) + " did not join within the timeout", agentLog(index));
    }
    std::this_thread::sleep_for(kPollPeriod);
  }
}

std::optional<std::vector<WorkerStamp>> ElasticJob::waitStampsUntil(int phase, int world,
                                                                    Clock::time_point until) {
  // Stamps never go away: each look starts at the first rank still missing.
  std::vector<WorkerStamp> stamps;
  while (static_cast<int>(stamps.size()) < world) {
    const int rank = static_cast<int>(stamps.size());
    const fs::path path =
        spec_.dir / ("rdzv." + std::to_string(phase) + "." + std::to_string(rank));
    if (const auto stamp = readStamp(path)) {
      stamps.push_back(*stamp);
      continue;
    }
    // An agent that succeeded is done with this round; one that failed ends the run.
    if (const auto exited = exitedAgent(); exited && !succeeded(agents_[*exited])) {
      fail("agent " + std::to_string(*exited) + " exited (" + describeStatus(agents_[*exited]) +
               ") before rank " + std::to_string(rank) + "'s " +
               (phase == 0 ? "first" : "replacement") + " worker started",
           agentLog(*exited));
    }
    if (Clock::now() > until) {
      return std::nullopt;
    }
    std::this_thread::sleep_for(kPollPeriod);
  }
  return stamps;
}

std::vector<WorkerStamp> ElasticJob::waitStamps(int phase, int world) {
  if (auto stamps = waitStampsUntil(phase, world, deadline_)) {
    return *stamps;
  }
  fail("not all " + std::to_string(world) + (phase == 0 ? " first" : " replacement") +
           " workers started within the timeout",
       daemon_ ? spec_.dir / "ddprund.log" : agentLog(0));
}

Clock::time_point ElasticJob::killAgent(int index) {
  std::ofstream(spec_.dir / "killed").put('\n');  // closed before the kill
  killed_ = index;
  const Clock::time_point now = Clock::now();
  agents_.at(index).signalGroup(SIGKILL);  // its own group: the agent and its workers
  return now;
}

void ElasticJob::waitSuccess() {
  for (std::size_t index = 0; index < agents_.size(); ++index) {
    if (static_cast<int>(index) == killed_) {
      continue;
    }
    launcher::Subprocess& agent = agents_[index];
    const std::string which = "agent " + std::to_string(index);
    if (!waitExit(agent, deadline_)) {
      fail(which + " was still running at the timeout", agentLog(static_cast<int>(index)));
    }
    if (!succeeded(agent)) {
      fail(which + " failed (" + describeStatus(agent) + ")", agentLog(static_cast<int>(index)));
    }
  }
}

void ElasticJob::stopAll() {
  // SIGTERM to each agent itself, all at once: each stops its own workers.
  for (auto& agent : agents_) {
    if (!agent.tryWait()) {
      ::kill(agent.pid(), SIGTERM);
    }
  }
  const auto grace = Clock::now() + kStopGrace;
  for (auto& agent : agents_) {
    waitExit(agent, grace);
    agent.stop(std::chrono::milliseconds(0));  // SIGKILL to the group of one still up
  }
  if (daemon_) {
    daemon_->stop(std::chrono::seconds(2));
  }
}

void ElasticJob::fail(const std::string& what, const fs::path& log) {
  stopAll();  // first, so every log is complete
  const fs::path kept = keepCopy(spec_.dir);
  const fs::path shown = kept.empty() ? log : kept / log.lexically_relative(spec_.dir);
  throw JobFailure(spec_.name + ": " + what + "; log: " + shown.string() +
                   (kept.empty() ? "" : " (the run's other logs are next to it)"));
}

}  // namespace ddprun::bench

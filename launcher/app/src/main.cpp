// ddprun: the per-node agent, a drop-in for torchrun. Parses torchrun's
// flags, picks the rendezvous backend, and supervises the local worker group.
// Exit status: 0 on success; the root-cause worker's exit code, or 128 +
// signal for a worker killed by a signal (as srun does); 128 + signal when
// ddprun itself was stopped by a handled signal; 2 for bad flags and for a
// configuration found wrong at start (ConfigError); 1 when it cannot start
// or the job failed elsewhere.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "ddprun/launcher/agent/agent.hpp"
#include "ddprun/launcher/app/node_workers.hpp"
#include "ddprun/launcher/app/rendezvous_backends.hpp"
#include "ddprun/launcher/app/subcommands.hpp"
#include "ddprun/launcher/config/cli.hpp"
#include "ddprun/launcher/config/launch_plan.hpp"
#include "ddprun/launcher/config/python_interpreter.hpp"
#include "ddprun/launcher/config/worker_command.hpp"
#include "ddprun/launcher/config/worker_environment.hpp"
#include "ddprun/launcher/core/agent_events.hpp"
#include "ddprun/launcher/core/environment.hpp"
#include "ddprun/launcher/core/log.hpp"
#include "ddprun/launcher/core/rendezvous.hpp"
#include "ddprun/launcher/host/device_count.hpp"
#include "ddprun/launcher/host/health_check.hpp"
#include "ddprun/launcher/host/numa_binding.hpp"
#include "ddprun/launcher/multihost/multihost_launch.hpp"
#include "ddprun/launcher/observe/agent_observers.hpp"
#include "ddprun/launcher/observe/timeline_format.hpp"
#include "ddprun/launcher/observe/timeline_writer.hpp"
#include "ddprun/launcher/output/run_logs.hpp"
#include "ddprun/launcher/output/start_paths.hpp"
#include "ddprun/launcher/process/subprocess.hpp"
#include "ddprun/launcher/process/worker_limits.hpp"
#include "ddprun/launcher/slurm/slurm_launch.hpp"
#include "ddprun/launcher/supervision/guardian.hpp"
#include "ddprun/launcher/supervision/worker_cgroup.hpp"
#include "ddprun/proto/errors.hpp"
#include "ddprun/proto/visible_text.hpp"
#include "ddprun/version.hpp"

namespace {

using namespace ddprun;
using launcher::LaunchConfig;
using launcher::log;

namespace fs = std::filesystem;

// A parent that set TORCHELASTIC_ERROR_FILE on ddprun gets the root cause's.
// Its error file, if there is one, is this attempt's: RunLogs empties each
// attempt's directory before its workers start. None with --log-dir /dev/null.
void copyRootCauseError(const launcher::RunResult& result) {
  const char* own = std::getenv("TORCHELASTIC_ERROR_FILE");
  if (own == nullptr || *own == '\0' || result.failures.empty() ||
      result.failures.front().error_file.empty() ||
      !fs::exists(result.failures.front().error_file)) {
    return;
  }
  std::error_code error;
  fs::copy_file(result.failures.front().error_file, own, fs::copy_options::overwrite_existing,
                error);
  if (error) {
    log().warn("cannot copy the root cause's error file to {}: {}", own, error.message());
  }
}

// A handled signal (Ctrl-C, a scheduler's SIGTERM) is the user's decision,
// not a worker failure: one line instead of a failure table (failures seen
// before it still have theirs), last, so it is what the terminal shows.
void reportInterrupted(const launcher::RunResult& result) {
  std::fprintf(stderr, "ddprun: interrupted by %s; %s\n",
               launcher::signalName(result.signal).c_str(),
               !result.started        ? "no worker had started"
               : result.stuck.empty() ? "workers stopped"
                                      : "not every worker could be stopped (above)");
}

// --logs-specs names a Python class torchrun loads to lay out its logs:
// refused, never ignored, since there is no Python in ddprun to load it into.
void refuseLogsSpecs(const LaunchConfig& config) {
  if (config.logs_specs) {
    throw ConfigError("--logs-specs " + *config.logs_specs +
                      ": names a Python entry point (group torchrun.logs_specs) that loads a "
                      "LogsSpecs class, and ddprun has no Python interpreter to load it into");
  }
}

// What is checked before each join. The GPUs are those counted at the start,
// when --nproc-per-node counted them (not counted otherwise: a CPU job
// never loads a GPU library).
launcher::HealthCheck healthCheck(const LaunchConfig& config, const fs::path& run_dir) {
  using Kind = launcher::NprocPerNode::Kind;
  launcher::HealthCheck check;
  check.command = config.health_check.value_or("");
  if (config.health_check_timeout_s) {
    check.timeout = std::chrono::milliseconds(std::llround(*config.health_check_timeout_s * 1000));
  }
  check.run_dir = run_dir;
  const Kind kind = config.nproc_per_node.kind;
  if (kind == Kind::kGpu || kind == Kind::kAuto || kind == Kind::kGpusElseDefault) {
    check.gpus_at_start = launcher::countVisibleGpus().count;
  }
  return check;
}

launcher::AgentConfig agentConfig(const LaunchConfig& config, int nproc,
                                  launcher::Rendezvous& rendezvous, const fs::path& run_dir,
                                  const std::string& host, const std::string& python,
                                  launcher::CpuBinding cpu_binding,
                                  launcher::WorkerEnvironment environment) {
  launcher::AgentConfig agent;
  agent.nproc_per_node = nproc;
  agent.worker_cpus = std::move(cpu_binding.cpus);
  agent.max_restarts = config.max_restarts;
  agent.shutdown_timeout = std::chrono::seconds(config.shutdown_grace_s);
  if (config.uninterruptible_state_timeout_s.value_or(0) > 0) {  // 0: off
    agent.uninterruptible_timeout = std::chrono::milliseconds(
        std::max<long long>(1, std::llround(*config.uninterruptible_state_timeout_s * 1000)));
  }
  agent.signals_to_handle = config.signals_to_handle;
  agent.rendezvous = &rendezvous;
  agent.environment = std::move(environment);
  agent.command = [&config, env = launcher::processEnvironment(), python](int local_rank) {
    return launcher::workerCommand(config, local_rank, env, python);
  };
  agent.output = launcher::RunLogs(config, run_dir, host);
  agent.hostname = host;
  agent.timer_file = config.timer_file.value_or("");
  if (config.worker_hang_timeout_s) {
    agent.worker_hang_timeout = std::chrono::milliseconds(
        std::max<long long>(1, std::llround(*config.worker_hang_timeout_s * 1000)));
  }
  agent.progress_timeout = config.progress_timeout.value_or(launcher::ProgressTimeout{});
  agent.max_unproductive_restarts = config.max_unproductive_restarts;
  agent.health_check = [check = healthCheck(config, run_dir)](int join) {
    return launcher::checkNodeHealth(check, join);
  };
  const char* path = std::getenv("PATH");
  agent.tools_path = path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin";
  return agent;
}

// --dry-run: what would be launched, as one JSON object on stdout; nothing
// is bound, written or started (the Python probe aside, which starts no worker).
int printPlan(const LaunchConfig& config, int nproc, const std::string& python) {
  launcher::ResolvedLaunch resolved;
  resolved.nproc = nproc;
  resolved.python = python;
  const auto python_exec = launcher::processEnvironment()("PYTHON_EXEC");
  resolved.python_source = python_exec && !python_exec->empty() ? "env:PYTHON_EXEC" : "derived";
  resolved.worker_argv = launcher::workerCommand(config, 0, launcher::processEnvironment(), python);
  std::puts(launcher::launchPlanJson(config, resolved).c_str());
  return 0;
}

// The timeline hears of each clock measurement and each quarantine of this
// host until it goes (the rendezvous, made first, outlives it and tells of
// both on its own threads).
class RendezvousToTimeline {
 public:
  RendezvousToTimeline(launcher::Rendezvous& rendezvous, launcher::TimelineWriter& timeline)
      : rendezvous_(rendezvous) {
    rendezvous_.watchClock(
        [&timeline](const launcher::ClockOffset& offset) { timeline.clockMeasured(offset); });
    rendezvous_.watchQuarantine(
        [&timeline](const launcher::QuarantineNotice& notice) { timeline.quarantined(notice); });
  }
  ~RendezvousToTimeline() {
    rendezvous_.watchQuarantine({});
    rendezvous_.watchClock({});
  }
  RendezvousToTimeline(const RendezvousToTimeline&) = delete;
  RendezvousToTimeline& operator=(const RendezvousToTimeline&) = delete;

 private:
  launcher::Rendezvous& rendezvous_;
};

std::string describeTimeline(const launcher::TimelineWriter& timeline) {
  return timeline.writing() ? "timeline in " + proto::visible(timeline.path().string())
                            : "no timeline";
}

// --hostfile: this process starts and supervises the job's agent on every host.
int runHostfileLaunch(const LaunchConfig& config) {
  std::vector<std::string> names;
  for (const auto& [name, value] : launcher::inheritedEnvironment()) {
    names.push_back(name);
  }
  const auto job = launcher::multihostJob(config, launcher::processEnvironment(), names);
  if (config.dry_run) {
    std::printf("%s\n", launcher::multihostPlanJson(config, job).c_str());
    return 0;
  }
  return launcher::runMultihost(config, job);
}

int runAgent(const LaunchConfig& config) {
  if (config.hostfile) {
    return runHostfileLaunch(config);
  }
  refuseLogsSpecs(config);
  launcher::checkStartPaths(config);
  const int nproc = launcher::resolveNproc(config.nproc_per_node);
  if (config.slurm) {
    // The driver is asked only when it decided the count (it was, just now).
    const bool gpus_counted =
        config.nproc_per_node.kind == launcher::NprocPerNode::Kind::kGpusElseDefault &&
        launcher::countVisibleGpus().count > 0;
    log().info("{}", launcher::describeSlurmLaunch(config, nproc, gpus_counted));
  }
  // Before anything is bound or forked: more workers than this machine lets
  // ddprun supervise is one line, not thousands of forks and a late error.
  if (const auto problem = launcher::workerLimitProblem(nproc, launcher::currentProcessLimits())) {
    throw ConfigError("--nproc-per-node " + std::to_string(nproc) + ": " + *problem);
  }
  // Also before anything is forked: a binding that cannot be honoured is one line.
  launcher::CpuBinding cpu_binding;
  if (config.numa_binding) {
    cpu_binding = launcher::bindOnThisMachine(*config.numa_binding, nproc);
  }
  const auto [python, workers_torch] =
      launcher::workersPython(config, launcher::processEnvironment());
  // Before anything is started too: a --virtual-local-rank worker without a
  // device of its own is refused here.
  auto environment = launcher::WorkerEnvironment::forLaunch(
      config, nproc, launcher::inheritedEnvironment(), workers_torch);
  if (config.dry_run) {
    return printPlan(config, nproc, python);
  }
  // Only the agent returns; the pid ddprun was started as stays its guardian,
  // which makes the job's cgroup meanwhile (taken as the first workers start).
  launcher::GuardianLink guardian = launcher::forkAgentUnderGuardian(config.signals_to_handle);
  if (config.stdin_hangup) {
    launcher::hangUpWhenStdinEnds(config.signals_to_handle);
  }
  const std::string host = launcher::thisHostName();
  const auto rendezvous = launcher::makeRendezvous(config, {nproc, host});
  // After the fork (it has a thread), and before the rendezvous goes.
  launcher::AgentObservers observers(config, nproc, host, *rendezvous,
                                     config.no_python ? config.training_script : python);
  const fs::path run_dir = launcher::runLogDir(config);
  // The timeline lives with the logs: --log-dir /dev/null (no run
  // directory) asks for no files at all, so none.
  const fs::path worker_events_dir =
      run_dir.empty() ? fs::path() : run_dir / launcher::timeline::kWorkerEventsDir;
  launcher::TimelineWriter timeline(
      run_dir.empty() ? fs::path() : run_dir / launcher::timeline::kFileName,
      {host, config.rdzv_id, worker_events_dir});
  if (timeline.writing()) {
    environment.reportTimelineEventsTo(worker_events_dir);
  }
  const launcher::ProgressDir progress_dir(run_dir);
  environment.reportProgressTo(progress_dir.path());
  const RendezvousToTimeline rendezvous_to_timeline(*rendezvous, timeline);
  if (timeline.writing()) {
    observers.add(&timeline);
  }
  const std::string binding_line = cpu_binding.description;
  launcher::AgentConfig agent_config =
      agentConfig(config, nproc, *rendezvous, run_dir, host, python, std::move(cpu_binding),
                  std::move(environment));
  std::unique_ptr<launcher::WorkerCgroup> cgroup;
  agent_config.job_cgroup = [&guardian, &cgroup] {
    std::string note;
    cgroup = guardian.jobCgroup(note);
    log().info("process clean-up: child subreaper, guardian pid {}, {}", getppid(), note);
    return cgroup.get();
  };
  agent_config.guardian_pidfd = guardian.pidfd();
  agent_config.events = observers.events();
  agent_config.heartbeat = observers.heartbeat();
  for (const std::string& notice : agent_config.environment.notices()) {
    log().warn("{}", notice);
  }
  for (const std::string& info : agent_config.environment.infos()) {
    log().info("{}", info);
  }
  // The run id and the paths are as given: shown by the one rule for such text.
  log().info("{}; {} worker(s), run id {}, {}, {}", rendezvous->describe(), nproc,
             proto::visible(config.rdzv_id), launcher::describeLogs(run_dir),
             describeTimeline(timeline));
  if (!binding_line.empty()) {
    log().info("{}", binding_line);
  }
  if (config.timer_file) {
    log().info("file timer: serving torch's FileTimerClient at {}",
               proto::visible(*config.timer_file));
  }
  const launcher::RunResult result = launcher::Agent(std::move(agent_config)).run();
  launcher::ignoreForwardedOnlySignals(config.signals_to_handle);  // at the exit barrier too
  if (result.signal != 0) {
    std::signal(result.signal, SIG_IGN);  // the guardian's late copy of it changes nothing now
  }
  // Said before the end of the job, which may wait for other nodes a while.
  if (!result.error.empty()) {
    std::fprintf(stderr, "ddprun: %s\n", result.error.c_str());
  }
  if (!result.failures.empty()) {
    const auto flight_recorder =
        launcher::analyseFlightRecorderDumps(result, python, std::chrono::seconds(60));
    std::fputs(launcher::formatFailureReport(result, host, config.training_script, flight_recorder)
                   .c_str(),
               stderr);
    copyRootCauseError(result);
  }
  if (!result.crash_loop.empty()) {
    std::fprintf(stderr, "ddprun: %s\n", result.crash_loop.c_str());
  }
  for (const std::string& stuck : result.stuck) {
    std::fprintf(stderr, "ddprun: %s\n", stuck.c_str());
  }
  const int exit_code = rendezvous->finishJob(result);  // no wait for other nodes after a signal
  timeline.close(exit_code);
  if (result.signal != 0) {
    reportInterrupted(result);
  }
  // A --hostfile agent's status reaches the launch through ssh, whose own
  // 255 means its session failed: the job's 255 must not read as that.
  return config.stdin_hangup && exit_code == 255 ? 254 : exit_code;
}

}  // namespace

int main(int argc, char** argv) {
  // Every child ddprun starts is waited for (the GPU count, the torch probe,
  // the agent under its guardian): an inherited SIG_IGN would have the
  // kernel reap them unseen, and each wait would spin to its deadline.
  std::signal(SIGCHLD, SIG_DFL);
  // A scheduler's warning may come while ddprun still starts (the torch probe
  // can take seconds): it must not end ddprun before the agent forwards it.
  // A --signals-to-handle that names one gets its handler once the agent runs.
  launcher::ignoreForwardedOnlySignals({});
  if (const auto code = launcher::runSubcommand({argv + 1, argv + argc})) {
    return *code;
  }
  LaunchConfig config;
  try {
    config = launcher::parseCommandLine({argv + 1, argv + argc}, launcher::processEnvironment());
  } catch (const launcher::SlurmError& error) {
    std::fprintf(stderr, "ddprun: %s\n", error.what());  // no flag to fix: no usage
    return 2;
  } catch (const ConfigError& error) {
    std::fprintf(stderr, "ddprun: %s\n%s", error.what(), launcher::usage().c_str());
    return 2;
  }
  if (config.show_help) {
    std::fputs(launcher::helpText().c_str(), stdout);
    return 0;
  }
  if (config.show_version) {
    std::printf("ddprun %s\n", ddprun::kVersion);
    return 0;
  }
  if (config.print_completion) {
    std::fputs(launcher::completionScript(*config.print_completion).c_str(), stdout);
    return 0;
  }
  if (config.log_level) {
    log().set_level(spdlog::level::from_str(*config.log_level));
  }
  for (const std::string& warning : config.warnings) {
    log().warn("{}", warning);
  }
  try {
    return runAgent(config);
  } catch (const ConfigError& error) {
    std::fprintf(stderr, "ddprun: %s\n", error.what());
    return 2;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "ddprun: %s\n", error.what());
    return 1;
  }
}

// Starting an attempt's workers (Agent::Impl, agent_impl.hpp): every
// worker's output relays and spawn options made first, the processes started
// two at a time (ParallelSpawn), then each one added to `workers` with its
// exit watched. On the agent's loop thread.
#include <fmt/ranges.h>

#include <algorithm>
#include <memory>
#include <utility>

#include "agent_impl.hpp"
#include "ddprun/launcher/core/log.hpp"

namespace ddprun::launcher {
namespace {

// `name`'s value in `env`; "" when it is not set.
std::string variable(const WorkerEnvironment::Variables& env, std::string_view name) {
  const auto found = std::find_if(env.begin(), env.end(),
                                  [name](const auto& entry) { return entry.first == name; });
  return found != env.end() ? found->second : std::string();
}

}  // namespace

void Agent::Impl::launchAttempt(const WorkerGroup& next) {
  group = next;
  const Clock::time_point joined = Clock::now();
  events().roundJoined(group, joined - rendezvous_started, joined);
  if (after_failure) {
    log().warn("restarting the worker group (attempt {})", group.attempt);
    after_failure = false;
  }
  log().info("round {}: node {} of {}, ranks {}..{} of {}, workers' store at {}", group.attempt,
             group.group_rank, group.group_world_size, group.base_rank,
             group.base_rank + config.nproc_per_node - 1, group.world_size,
             formatEndpoint(group.store_host, group.store_port));
  workers.clear();
  watchdogs.attemptStarted();
  openPeerChannel();
  result.failures.clear();
  failure_checked = false;
  stop_killed = false;
  unproductive_counted = false;
  ++result.attempts;
  result.started = true;
  phase = Phase::Running;
  running = 0;
  // Every worker's relays and options first, then the processes two at a
  // time (ParallelSpawn). A worker that cannot be started ends the attempt
  // as it always did: those before it run and are stopped, those after it
  // are killed, never having been workers.
  const auto count = static_cast<std::size_t>(config.nproc_per_node);
  std::vector<PreparedWorker> prepared;
  std::vector<SpawnOptions> options(count);
  prepared.reserve(count);
  for (std::size_t index = 0; index < count; ++index) {
    prepared.push_back(prepareWorker(static_cast<int>(index), options[index]));
  }
  // As late as may be: the guardian makes it while the agent sets up.
  if (config.job_cgroup) {
    tree.adoptCgroup(std::exchange(config.job_cgroup, nullptr)());
  }
  for (SpawnOptions& spawn : options) {
    spawn.cgroup_fd = tree.cgroupFd();
  }
  std::vector<SpawnOutcome> started = spawner.startAll(options);
  for (std::size_t index = 0; index < count; ++index) {
    if (started[index].error) {
      // SIGKILLed and left to the process tree's reaping, not waited for
      // here: one stuck in the kernel must not stop the loop.
      for (std::size_t later = index + 1; later < count; ++later) {
        if (started[later].process) {
          started[later].process->killAndAbandon();
        }
      }
      std::rethrow_exception(started[index].error);
    }
    addWorker(prepared[index], options[index], std::move(*started[index].process),
              started[index].started_at);
  }
}

// Its output's relays and its spawn options. No process yet; it will be
// `workers[local_rank]`, which is what its relays' observers are told.
Agent::Impl::PreparedWorker Agent::Impl::prepareWorker(int local_rank, SpawnOptions& options) {
  const int rank = group.base_rank + local_rank;
  const auto index = static_cast<std::size_t>(local_rank);
  const WorkerOutput output =
      config.output ? config.output(local_rank, rank, group.attempt) : WorkerOutput{};
  WorkerEnd out = relays.open(relays.stdoutConsole(),
                              {output.stdout_to_console, output.stdout_prefix, output.stdout_file,
                               output.stdout_may_be_terminal, output.stdout_filter},
                              watchdogs.outputObserver(index));
  WorkerEnd err = relays.open(relays.stderrConsole(),
                              {output.stderr_to_console, output.stderr_prefix, output.stderr_file,
                               output.stderr_may_be_terminal, output.stderr_filter},
                              watchdogs.outputObserver(index));
  options.argv = config.command(local_rank);
  options.env = config.environment.forWorker(group, local_rank, output.error_file);
  options.stdout_fd = out.fd.fd;
  options.stderr_fd = err.fd.fd;
  // Its terminals are not its controlling terminal: /dev/tty stays the
  // user's (getpass, pagers), and resizes are signalled by the agent.
  if (!config.worker_cpus.empty()) {
    options.cpu_affinity = config.worker_cpus.at(static_cast<std::size_t>(local_rank));
  }
  return PreparedWorker{local_rank, rank, output.error_file, std::move(out), std::move(err)};
}

// A started worker joins `workers`: its exit watched, its watchdogs and the
// observers told (of the moment it started, not this one).
void Agent::Impl::addWorker(const PreparedWorker& prepared, const SpawnOptions& options,
                            Subprocess process, Clock::time_point started_at) {
  const std::size_t index = workers.size();
  Worker worker{std::move(process),  nullptr, prepared.local_rank, prepared.rank, false,
                prepared.error_file, {}};
  worker.faulthandler = !variable(options.env, proto::env::kPythonFaultHandler).empty();
  if (worker.process.pidfd() < 0) {
    throw SpawnError("ddprun needs pidfd_open (Linux 5.3 or later) to supervise workers", ENOSYS);
  }
  if (log().should_log(
          spdlog::level::debug)) {  // LOGLEVEL=DEBUG: the command, not formatted otherwise
    log().debug("local rank {} (rank {}) started as pid {}: {}", prepared.local_rank, prepared.rank,
                worker.process.pid(), fmt::join(options.argv, " "));
  }
  // Never called once the watch is gone: launchAttempt clears the last
  // group's workers, watches included, before it starts the next.
  worker.exit_watch = std::make_unique<ExitWatch>(
      io, worker.process.pidfd(), [this, index] { onExit(index); },
      "local rank " + std::to_string(prepared.local_rank) + "'s worker");
  watchdogs.workerStarted(index, worker.process.pid(), worker.error_file,
                          variable(options.env, proto::env::kProgressEvents), worker.faulthandler);
  events().workerStarted(prepared.local_rank, prepared.rank, worker.process.pid(), started_at);
  workers.push_back(std::move(worker));
  ++running;
}

}  // namespace ddprun::launcher

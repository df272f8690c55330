// Event flow (all on the io_context of the thread that calls run()):
//
//   startAttempt -> spawn workers -> watchExit (pidfd readable)
//        ^                                |
//        |            success: all done -> finish(0)
//        |            failure or signal -> stopGroup: SIGTERM (or the signal)
//        |                                 to every group, grace timer
//        |                                 -> SIGKILL survivors on expiry
//        +---- restarts left (failure) <-- afterStop, once all have exited
//
// Nothing here throws after run() starts except SpawnError from a worker
// that cannot be started, which ends the run.
#include "ddprun/launcher/agent.hpp"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <ctime>
#include <map>
#include <memory>
#include <sstream>

#include "ddprun/net/asio.hpp"

namespace ddprun::launcher {
namespace {

using Clock = std::chrono::steady_clock;
namespace asio = net::asio;

std::vector<std::pair<std::string, std::string>> workerEnvironment(
    const std::vector<std::pair<std::string, std::string>>& base, const proto::WorkerEnv& worker) {
  std::map<std::string, std::string> merged(base.begin(), base.end());
  for (auto& [name, value] : proto::toEnvironment(worker)) {
    merged[name] = std::move(value);
  }
  return {merged.begin(), merged.end()};
}

std::string formatTime(std::chrono::system_clock::time_point time) {
  const std::time_t seconds = std::chrono::system_clock::to_time_t(time);
  std::tm local{};
  localtime_r(&seconds, &local);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%d_%H:%M:%S", &local);
  return text;
}

}  // namespace

struct Agent::Impl {
  struct Worker {
    Subprocess process;
    std::unique_ptr<asio::posix::stream_descriptor> exit_watch;
    int local_rank = 0;
    int rank = 0;
    bool exited = false;
  };

  enum class Phase { Running, Stopping, Done };

  explicit Impl(AgentConfig agent_config)
      : config(std::move(agent_config)), signals(io), grace(io) {}

  void startAttempt();
  void spawnWorker(int local_rank);
  void onExit(std::size_t index);
  void recordFailure(const Worker& worker, const ExitStatus& status);
  void stopGroup(int signal);
  void afterStop();
  void finish(int exit_code);
  void waitForSignal();

  AgentConfig config;
  asio::io_context io{1};
  asio::signal_set signals;
  asio::steady_timer grace;
  std::vector<Worker> workers;
  int attempt = 0;
  int running = 0;
  Phase phase = Phase::Running;
  bool restart_after_stop = false;
  RunResult result;
};

void Agent::Impl::startAttempt() {
  if (config.before_attempt) {
    config.before_attempt(attempt);
  }
  workers.clear();
  result.failures.clear();
  result.attempts = attempt + 1;
  phase = Phase::Running;
  running = 0;
  for (int local_rank = 0; local_rank < config.nproc_per_node; ++local_rank) {
    spawnWorker(local_rank);
  }
}

void Agent::Impl::spawnWorker(int local_rank) {
  proto::WorkerEnv env = config.group;
  env.local_rank = local_rank;
  env.rank = config.group.group_rank * config.nproc_per_node + local_rank;
  env.role_rank = env.rank;
  env.restart_count = attempt;
  env.max_restarts = config.max_restarts;
  SpawnOptions options;
  options.argv = config.command(local_rank);
  options.env = workerEnvironment(config.base_env, env);
  Worker worker{Subprocess(options), nullptr, local_rank, env.rank, false};
  if (worker.process.pidfd() < 0) {
    throw SpawnError("ddprun needs pidfd_open (Linux 5.3 or later) to supervise workers", ENOSYS);
  }
  worker.exit_watch =
      std::make_unique<asio::posix::stream_descriptor>(io, ::dup(worker.process.pidfd()));
  const std::size_t index = workers.size();
  worker.exit_watch->async_wait(asio::posix::stream_descriptor::wait_read,
                                [this, index, generation = attempt](const net::error_code& e) {
                                  if (!e && generation == attempt) {
                                    onExit(index);
                                  }
                                });
  workers.push_back(std::move(worker));
  ++running;
}

void Agent::Impl::onExit(std::size_t index) {
  Worker& worker = workers[index];
  const ExitStatus status = worker.process.wait();  // the pidfd says it has exited
  worker.exited = true;
  --running;
  const bool stopped_by_us = phase == Phase::Stopping && status.kind == ExitStatus::Kind::Signaled;
  if (!status.success() && !stopped_by_us) {
    recordFailure(worker, status);
  }
  if (phase == Phase::Running && !status.success()) {
    restart_after_stop = attempt < config.max_restarts;
    stopGroup(SIGTERM);
    return;
  }
  if (running > 0) {
    return;
  }
  if (phase == Phase::Stopping) {
    afterStop();
  } else {
    finish(0);  // every worker succeeded
  }
}

void Agent::Impl::recordFailure(const Worker& worker, const ExitStatus& status) {
  result.failures.push_back({attempt, worker.rank, worker.local_rank, worker.process.pid(), status,
                             std::chrono::system_clock::now(), Clock::now()});
}

void Agent::Impl::stopGroup(int signal) {
  phase = Phase::Stopping;
  for (Worker& worker : workers) {
    if (!worker.exited) {
      worker.process.signalGroup(signal);
    }
  }
  if (running == 0) {
    asio::post(io, [this] { afterStop(); });
    return;
  }
  grace.expires_after(config.shutdown_timeout);
  grace.async_wait([this](const net::error_code& error) {
    if (error) {
      return;
    }
    for (Worker& worker : workers) {
      if (!worker.exited) {
        worker.process.signalGroup(SIGKILL);
      }
    }
  });
}

void Agent::Impl::afterStop() {
  grace.cancel();
  if (phase == Phase::Done) {
    return;
  }
  if (restart_after_stop && result.signal == 0) {
    restart_after_stop = false;
    ++attempt;
    startAttempt();
    return;
  }
  if (result.signal != 0) {
    finish(128 + result.signal);
    return;
  }
  std::stable_sort(
      result.failures.begin(), result.failures.end(),
      [](const WorkerFailure& a, const WorkerFailure& b) { return a.monotonic < b.monotonic; });
  finish(result.failures.empty() ? 1 : result.failures.front().status.shellCode());
}

void Agent::Impl::finish(int exit_code) {
  phase = Phase::Done;
  result.exit_code = exit_code;
  net::error_code ignored;
  signals.cancel(ignored);
  grace.cancel();
}

void Agent::Impl::waitForSignal() {
  signals.async_wait([this](const net::error_code& error, int signal) {
    if (error || phase == Phase::Done) {
      return;
    }
    if (result.signal != 0) {
      // A second signal while stopping: do not make the user wait the grace.
      for (Worker& worker : workers) {
        if (!worker.exited) {
          worker.process.signalGroup(SIGKILL);
        }
      }
    } else {
      result.signal = signal;
      restart_after_stop = false;
      stopGroup(signal);  // forwarded as is, as torchrun does
    }
    waitForSignal();
  });
}

Agent::Agent(AgentConfig config) : impl_(std::make_unique<Impl>(std::move(config))) {}

Agent::~Agent() = default;

RunResult Agent::run() {
  for (int signal : impl_->config.signals_to_handle) {
    impl_->signals.add(signal);
  }
  impl_->waitForSignal();
  impl_->startAttempt();
  impl_->io.run();
  return impl_->result;
}

std::string formatFailureReport(const RunResult& result, const std::string& hostname,
                                const std::string& program) {
  std::ostringstream out;
  const std::string rule(60, '=');
  auto describe = [&](const WorkerFailure& failure) {
    const int code = failure.status.kind == ExitStatus::Kind::Exited ? failure.status.code
                                                                     : -failure.status.code;
    out << "  time      : " << formatTime(failure.time) << "\n"
        << "  host      : " << hostname << "\n"
        << "  rank      : " << failure.rank << " (local_rank: " << failure.local_rank << ")\n"
        << "  exitcode  : " << code << " (pid: " << failure.pid << ")\n"
        << "  attempt   : " << failure.attempt << "\n"
        << "  reason    : " << failure.status.describe() << "\n";
  };
  out << rule << "\n" << program << " FAILED\n" << std::string(60, '-') << "\n";
  out << "Failures:\n";
  if (result.failures.size() <= 1) {
    out << "  <NO_OTHER_FAILURES>\n";
  }
  for (std::size_t i = 1; i < result.failures.size(); ++i) {
    out << "[" << i << "]:\n";
    describe(result.failures[i]);
  }
  out << std::string(60, '-') << "\nRoot Cause (first observed failure):\n[0]:\n";
  if (!result.failures.empty()) {
    describe(result.failures.front());
  }
  out << rule << "\n";
  return out.str();
}

}  // namespace ddprun::launcher

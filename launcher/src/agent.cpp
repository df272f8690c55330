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
// Elastic (c10d): each attempt first waits for the rendezvous's next round
// on a helper thread (phase Waiting; signals still handled), and a newer
// round pushed while workers run stops them (onRoundOver) without counting
// a restart.
//
// Nothing here throws after run() starts except SpawnError from a worker
// that cannot be started, or the rendezvous's error, which end the run.
#include "ddprun/launcher/agent.hpp"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "ddprun/net/asio.hpp"
#include "line_relay.hpp"

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

// When the worker recorded its error, if its error file says so finely
// (extraInfo.monotonic_ns, CLOCK_MONOTONIC like ours). A worker that fails
// first may be seen exiting after a peer it took down, whose exit the kernel
// reported sooner; the recorded time puts the root cause first anyway.
std::optional<Clock::time_point> recordedFailureTime(const std::string& error_file) {
  std::ifstream in(error_file);
  if (error_file.empty() || !in) {
    return std::nullopt;
  }
  const auto json = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  try {
    const std::string text = json.at("message").at("extraInfo").at("monotonic_ns");
    return Clock::time_point(std::chrono::nanoseconds(std::stoll(text)));
  } catch (const std::exception&) {
    return std::nullopt;  // torch's own files carry whole seconds only
  }
}

}  // namespace

struct Agent::Impl {
  struct Worker {
    Subprocess process;
    std::unique_ptr<asio::posix::stream_descriptor> exit_watch;
    int local_rank = 0;
    int rank = 0;
    bool exited = false;
    std::string error_file;
  };

  // Waiting: elastic, for the rendezvous to form this node's next round.
  enum class Phase { Waiting, Running, Stopping, Done };

  explicit Impl(AgentConfig agent_config)
      : config(std::move(agent_config)), signals(io), grace(io), drain(io) {}

  void startAttempt();
  void launchAttempt();
  void waitForRound();
  void onRound(std::optional<AttemptGroup> next, std::exception_ptr error);
  void onRoundOver(std::int64_t newer_round);
  void spawnWorker(int local_rank);
  void onExit(std::size_t index);
  void recordFailure(const Worker& worker, const ExitStatus& status);
  void stopGroup(int signal);
  void afterStop();
  void finish(int exit_code);
  void waitForSignal();
  void startRelay(int pipe_fd, bool to_console, int console_fd, const std::string& prefix,
                  const std::string& file);
  void drainRelaysThenStop();

  AgentConfig config;
  asio::io_context io{1};
  asio::signal_set signals;
  asio::steady_timer grace;
  asio::steady_timer drain;
  std::vector<Worker> workers;
  std::vector<std::shared_ptr<LineRelay>> relays;
  int open_relays = 0;    // relays not yet at end of stream
  int attempt = 0;        // TORCHELASTIC_RESTART_COUNT (elastic: the round number)
  int restarts_used = 0;  // failures restarted, against max_restarts
  int base_rank = 0;      // global rank of local rank 0
  int running = 0;
  Phase phase = Phase::Running;
  bool restart_after_stop = false;
  bool round_over = false;   // elastic: this stop is for a membership change
  std::thread round_waiter;  // elastic: blocks in next_round() off this thread
  std::exception_ptr round_error;
  RunResult result;
};

void Agent::Impl::startAttempt() {
  if (config.elastic.next_round) {
    waitForRound();
  } else {
    launchAttempt();
  }
}

void Agent::Impl::launchAttempt() {
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

// Elastic: this attempt is the next round. It may take until another node
// arrives, so the wait runs on its own thread and this loop keeps handling
// signals; finish() cancels the wait.
void Agent::Impl::waitForRound() {
  phase = Phase::Waiting;
  if (round_waiter.joinable()) {
    round_waiter.join();  // the previous wait has posted its result already
  }
  round_waiter = std::thread([this] {
    std::optional<AttemptGroup> next;
    std::exception_ptr error;
    try {
      next = config.elastic.next_round();
    } catch (...) {
      error = std::current_exception();
    }
    asio::post(io, [this, next, error] { onRound(next, error); });
  });
}

void Agent::Impl::onRound(std::optional<AttemptGroup> next, std::exception_ptr error) {
  if (phase != Phase::Waiting) {
    return;  // a signal ended the run meanwhile
  }
  if (error) {
    round_error = error;  // rethrown by run(): no round, nothing to supervise
    finish(1);
    return;
  }
  if (!next) {
    result.closed_elsewhere = true;
    finish(result.failures.empty() ? 0 : result.failures.front().status.shellCode());
    return;
  }
  config.group = next->group;
  attempt = next->attempt;
  base_rank = next->base_rank;
  launchAttempt();
}

// Elastic: the rendezvous moved past the running round (a node was lost or
// arrived): stop the workers and join the next one; not a failure.
void Agent::Impl::onRoundOver(std::int64_t newer_round) {
  if (newer_round <= attempt || phase == Phase::Waiting || phase == Phase::Done) {
    return;  // news of the round running now, or nothing runs
  }
  if (phase == Phase::Stopping) {
    // Workers often fail first when a peer node dies (their connections
    // reset). With no restart asked for, that failure was the lost node's:
    // move to the new round without counting it.
    if (!restart_after_stop && result.signal == 0) {
      restart_after_stop = true;
      round_over = true;
    }
    return;
  }
  restart_after_stop = true;
  round_over = true;
  stopGroup(SIGTERM);
}

void Agent::Impl::spawnWorker(int local_rank) {
  proto::WorkerEnv env = config.group;
  env.local_rank = local_rank;
  env.rank = base_rank + local_rank;
  env.role_rank = env.rank;
  env.restart_count = attempt;
  env.max_restarts = config.max_restarts;
  const WorkerOutput output =
      config.output ? config.output(local_rank, env.rank, attempt) : WorkerOutput{};
  env.error_file = output.error_file;
  int out_pipe[2];
  int err_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0 || pipe2(err_pipe, O_CLOEXEC) != 0) {
    throw SpawnError("cannot create pipes for a worker's output", errno);
  }
  SpawnOptions options;
  options.argv = config.command(local_rank);
  options.env = workerEnvironment(config.base_env, env);
  options.stdout_fd = out_pipe[1];
  options.stderr_fd = err_pipe[1];
  Worker worker{Subprocess(options), nullptr, local_rank, env.rank, false, output.error_file};
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  startRelay(out_pipe[0], output.stdout_to_console, STDOUT_FILENO, output.stdout_prefix,
             output.stdout_file);
  startRelay(err_pipe[0], output.stderr_to_console, STDERR_FILENO, output.stderr_prefix,
             output.stderr_file);
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
    restart_after_stop = restarts_used < config.max_restarts;
    if (restart_after_stop && config.elastic.request_restart) {
      config.elastic.request_restart();  // every node moves to the next round
    }
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
                             worker.error_file, std::chrono::system_clock::now(), Clock::now()});
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
    if (!round_over) {
      ++restarts_used;  // a membership change is not a failure
    }
    round_over = false;
    if (!config.elastic.next_round) {
      ++attempt;
    }
    startAttempt();
    return;
  }
  if (result.signal != 0) {
    finish(128 + result.signal);
    return;
  }
  for (WorkerFailure& failure : result.failures) {
    if (auto recorded = recordedFailureTime(failure.error_file)) {
      failure.monotonic = std::min(failure.monotonic, *recorded);
    }
  }
  std::stable_sort(
      result.failures.begin(), result.failures.end(),
      [](const WorkerFailure& a, const WorkerFailure& b) { return a.monotonic < b.monotonic; });
  finish(result.failures.empty() ? 1 : result.failures.front().status.shellCode());
}

void Agent::Impl::finish(int exit_code) {
  if (round_waiter.joinable() && config.elastic.cancel_wait) {
    config.elastic.cancel_wait();  // a pending next_round() returns; run() joins it
  }
  phase = Phase::Done;
  result.exit_code = exit_code;
  net::error_code ignored;
  signals.cancel(ignored);
  grace.cancel();
  drainRelaysThenStop();
}

void Agent::Impl::startRelay(int pipe_fd, bool to_console, int console_fd,
                             const std::string& prefix, const std::string& file) {
  int file_fd = -1;
  if (!file.empty()) {
    std::error_code ignored;
    std::filesystem::create_directories(std::filesystem::path(file).parent_path(), ignored);
    file_fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  }
  ++open_relays;
  auto relay = std::make_shared<LineRelay>(io, pipe_fd, to_console ? console_fd : -1, prefix,
                                           file_fd, [this] {
                                             if (--open_relays == 0 && phase == Phase::Done) {
                                               drain.cancel();
                                             }
                                           });
  relay->start();
  relays.push_back(std::move(relay));
}

// The workers have exited; their pipes reach end of stream at once unless a
// process they started still holds them open. Give those half a second.
void Agent::Impl::drainRelaysThenStop() {
  if (open_relays == 0) {
    return;
  }
  drain.expires_after(std::chrono::milliseconds(500));
  drain.async_wait([this](const net::error_code& error) {
    if (!error) {
      for (auto& relay : relays) {
        relay->stop();
      }
    }
  });
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
  impl_->base_rank = impl_->config.group.group_rank * impl_->config.nproc_per_node;
  if (impl_->config.elastic.on_round_over) {
    impl_->config.elastic.on_round_over([impl = impl_.get()](std::int64_t newer_round) {
      asio::post(impl->io, [impl, newer_round] { impl->onRoundOver(newer_round); });
    });
  }
  impl_->startAttempt();
  impl_->io.run();
  if (impl_->config.elastic.on_round_over) {
    impl_->config.elastic.on_round_over({});  // the rendezvous outlives this agent loop
  }
  if (impl_->round_waiter.joinable()) {
    impl_->round_waiter.join();
  }
  if (impl_->round_error) {
    std::rethrow_exception(impl_->round_error);
  }
  return impl_->result;
}

}  // namespace ddprun::launcher

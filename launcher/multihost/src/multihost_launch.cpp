// runMultihost(): the agents of a --hostfile launch, started, relayed and
// awaited on one io_context (multihost_launch.hpp).
#include "ddprun/launcher/multihost/multihost_launch.hpp"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <memory>
#include <optional>

#include "ddprun/launcher/core/log.hpp"
#include "ddprun/launcher/core/owned_fd.hpp"
#include "ddprun/launcher/output/console.hpp"
#include "ddprun/launcher/output/line_relay.hpp"
#include "ddprun/launcher/process/subprocess.hpp"
#include "ddprun/proto/errors.hpp"
#include "ddprun/rendezvous/server.hpp"

namespace ddprun::launcher {
namespace {

namespace asio = net::asio;

// ssh's own exit status when the session failed or dropped.
constexpr int kSshFailed = 255;
// Seconds beyond the shutdown timeout the other agents get to end on their
// own after one failed (their rendezvous's keep-alive finds a lost node).
constexpr int kSettleMargin = 30;
// How long the agents' last lines are awaited once every agent has ended.
constexpr std::chrono::seconds kDrain{1};

// One host's agent: its process, the end of its stdin this process holds
// (closed: a remote agent's session input ends, --stdin-hangup), and how it ended.
struct RunningAgent {
  HostAgent plan;
  std::optional<Subprocess> process;
  std::optional<OwnedFd> stdin_writer;
  std::unique_ptr<asio::posix::stream_descriptor> exit_watch;
  std::optional<ExitStatus> status;
  bool stopped_here = false;  // this process stopped it: its status is no root cause
};

std::pair<OwnedFd, OwnedFd> makePipe() {
  int ends[2];
  if (::pipe2(ends, O_CLOEXEC) != 0) {
    throw SpawnError("cannot make a pipe", errno);
  }
  return {OwnedFd(ends[0]), OwnedFd(ends[1])};
}

class Launch {
 public:
  Launch(const LaunchConfig& config, const MultihostJob& job)
      : config_(config),
        job_(job),
        consoles_(consolesOfThisProcess()),
        signals_(io_, SIGINT, SIGTERM, SIGHUP),
        grace_(io_),
        settle_(io_) {}

  int run() {
    for (HostAgent& plan : planHostAgents(job_)) {
      agents_.push_back(std::make_unique<RunningAgent>());
      agents_.back()->plan = std::move(plan);
    }
    log().info("--hostfile {}: {} host(s), rendezvous {} at {}, run id {}", *config_.hostfile,
               agents_.size(), hostsRendezvous(config_) ? "hosted here" : "elsewhere",
               job_.rdzv_endpoint, job_.rdzv_id);
    for (auto& agent : agents_) {
      start(*agent);
    }
    waitForSignal();
    io_.run();
    return exitStatus();
  }

 private:
  void start(RunningAgent& agent) {
    log().info("{}: {}", agent.plan.host, agent.plan.shown);
    auto [out_read, out_write] = makePipe();
    auto [err_read, err_write] = makePipe();
    SpawnOptions options;
    options.argv = agent.plan.argv;
    options.env = inheritedEnvironment();
    for (const auto& variable : agent.plan.env) {
      std::erase_if(options.env,
                    [&](const auto& inherited) { return inherited.first == variable.first; });
      options.env.push_back(variable);
    }
    options.stdout_fd = out_write.fd;
    options.stderr_fd = err_write.fd;
    std::optional<OwnedFd> stdin_read;
    if (agent.plan.over_ssh) {
      auto [read_end, write_end] = makePipe();
      options.stdin_fd = read_end.fd;
      stdin_read.emplace(std::move(read_end));
      agent.stdin_writer.emplace(std::move(write_end));
    }
    agent.process.emplace(options);
    const std::string prefix = agent.plan.host + ": ";
    relay(std::exchange(out_read.fd, -1), &consoles_.out, prefix);
    relay(std::exchange(err_read.fd, -1), &consoles_.err, prefix);
    if (agent.process->pidfd() < 0) {
      throw Error("cannot watch " + agent.plan.host + "'s agent: this kernel has no pidfd_open");
    }
    agent.exit_watch =
        std::make_unique<asio::posix::stream_descriptor>(io_, ::dup(agent.process->pidfd()));
    agent.exit_watch->async_wait(asio::posix::stream_descriptor::wait_read,
                                 [this, &agent](const net::error_code&) { onExit(agent); });
  }

  void relay(int fd, Console* console, const std::string& prefix) {
    LineRelay::Sinks sinks;
    sinks.console = console;
    sinks.prefix = prefix;
    relays_.push_back(std::make_shared<LineRelay>(io_, fd, std::move(sinks), [this] {
      if (exited_ == agents_.size() && allRelayed()) {
        grace_.cancel();  // the drain is over before its time
      }
    }));
    relays_.back()->start();
  }

  // The agents of a failed job end on their own (the rendezvous tells
  // them); only a stop asked of this process stops them from here.
  void onExit(RunningAgent& agent) {
    agent.status = agent.process->waitAndKillGroup();
    if (agent.status->success()) {
      log().info("{}: its agent finished", agent.plan.host);
    } else {
      const bool lost = isLost(agent);
      log().warn(
          "{}: {}{}", agent.plan.host, howItEnded(agent),
          lost && elastic() ? "; the job goes on without it (--nnodes " + job_.nnodes + ")" : "");
      if (!(lost && elastic())) {
        failures_.push_back(&agent);
        if (lost) {
          stopAll(0);  // a fixed number of nodes cannot go on without it
        } else {
          stopLaterUnlessOver();
        }
      }
    }
    agent.stdin_writer.reset();
    if (++exited_ == agents_.size()) {
      finish();
    }
  }

  // The others normally end within their shutdown timeout once one has
  // failed; what still runs after it (and a margin) is stopped from here.
  void stopLaterUnlessOver() {
    if (stopping_ || settling_) {
      return;
    }
    settling_ = true;
    settle_.expires_after(std::chrono::seconds(config_.shutdown_grace_s + kSettleMargin));
    settle_.async_wait([this](const net::error_code& error) {
      if (!error && !stopping_) {
        log().warn("the job failed and some agents still run: stopping them");
        stopAll(0);
      }
    });
  }

  // The job's status is its first failure's, as one node's agent's is. An
  // agent that ended because the job failed elsewhere exits 1, and one this
  // process stopped says only that: the first failure that is neither names
  // the root cause where there is one.
  const RunningAgent* rootCause() const {
    const auto first = [&](auto&& is_cause) -> const RunningAgent* {
      const auto found = std::find_if(failures_.begin(), failures_.end(), is_cause);
      return found != failures_.end() ? *found : nullptr;
    };
    if (const auto* own = first([](const RunningAgent* a) {
          return !a->stopped_here && a->status->shellCode() != 1;
        })) {
      return own;
    }
    if (const auto* any = first([](const RunningAgent* a) { return !a->stopped_here; })) {
      return any;
    }
    return failures_.empty() ? nullptr : failures_.front();
  }

  static bool isLost(const RunningAgent& agent) {
    return agent.plan.over_ssh && agent.status->kind == ExitStatus::Kind::Exited &&
           agent.status->code == kSshFailed;
  }

  static std::string howItEnded(const RunningAgent& agent) {
    return isLost(agent) ? "the ssh session failed or dropped (ssh exited 255): the host is lost"
                         : "its agent " + agent.status->describe();
  }

  bool elastic() const { return job_.nnodes.find(':') != std::string::npos; }

  void waitForSignal() {
    signals_.async_wait([this](const net::error_code& error, int signal) {
      if (error) {
        return;
      }
      if (signal_ != 0) {
        log().warn("{} again: killing every agent started here now", signalName(signal));
        killAll();
      } else {
        log().warn("{}: stopping every host's agent (up to {} s)", signalName(signal),
                   config_.shutdown_grace_s);
        signal_ = signal;
        stopAll(signal);
      }
      waitForSignal();
    });
  }

  // A remote agent's session input ends (it stops as on SIGHUP); a local one
  // gets `signal` (SIGTERM when 0). What still runs after the grace is killed.
  void stopAll(int signal) {
    stopping_ = true;
    for (auto& agent : agents_) {
      if (agent->status) {
        continue;
      }
      agent->stdin_writer.reset();
      agent->stopped_here = true;
      if (!agent->plan.over_ssh) {
        agent->process->signalGroup(signal == 0 ? SIGTERM : signal);
      }
    }
    grace_.expires_after(std::chrono::seconds(config_.shutdown_grace_s + 5));
    grace_.async_wait([this](const net::error_code& error) {
      if (!error) {
        log().warn("the agents did not stop within the shutdown timeout: killing them");
        killAll();
      }
    });
  }

  void killAll() {
    for (auto& agent : agents_) {
      if (!agent->status) {
        agent->process->signalGroup(SIGKILL);
      }
    }
  }

  bool allRelayed() const {
    return std::all_of(relays_.begin(), relays_.end(),
                       [](const auto& relay) { return relay->finished(); });
  }

  // Every agent has ended. Their lines still in the pipes are read for a
  // moment; a pipe something else still holds open (a daemonised ssh helper)
  // must not keep this process waiting.
  void finish() {
    grace_.cancel();
    settle_.cancel();
    net::error_code ignored;
    signals_.cancel(ignored);
    if (allRelayed()) {
      return;
    }
    grace_.expires_after(kDrain);
    grace_.async_wait([this](const net::error_code& error) {
      if (!error) {
        for (const auto& relay : relays_) {
          relay->stop();
        }
        io_.stop();
      }
    });
  }

  int exitStatus() const {
    if (signal_ != 0) {
      return 128 + signal_;
    }
    if (const RunningAgent* failure = rootCause()) {
      std::fprintf(stderr, "ddprun: host %s: %s\n", failure->plan.host.c_str(),
                   howItEnded(*failure).c_str());
      return failure->status->shellCode();
    }
    const bool any_succeeded = std::any_of(agents_.begin(), agents_.end(), [](const auto& agent) {
      return agent->status && agent->status->success();
    });
    if (!any_succeeded) {
      std::fprintf(stderr, "ddprun: every host was lost; nothing finished the job\n");
    }
    return any_succeeded ? 0 : 1;
  }

  const LaunchConfig& config_;
  const MultihostJob& job_;
  asio::io_context io_{1};
  Consoles consoles_;
  asio::signal_set signals_;
  asio::steady_timer grace_;   // a stop's: then SIGKILL
  asio::steady_timer settle_;  // after a failure: then stop the rest
  std::vector<std::unique_ptr<RunningAgent>> agents_;
  std::vector<std::shared_ptr<LineRelay>> relays_;
  std::size_t exited_ = 0;
  std::vector<const RunningAgent*> failures_;  // in the order they ended
  bool stopping_ = false;
  bool settling_ = false;
  int signal_ = 0;
};

}  // namespace

int runMultihost(const LaunchConfig& config, MultihostJob job) {
  std::unique_ptr<rdzv::Server> rendezvous;
  if (hostsRendezvous(config)) {
    rdzv::ServerOptions options;
    options.port = 0;  // a free one: two launches on one machine never collide
    options.rendezvous_run_id = job.rdzv_id;
    rendezvous = std::make_unique<rdzv::Server>(options);
    rendezvous->start();
    job.rdzv_endpoint = job.rdzv_endpoint.substr(0, job.rdzv_endpoint.rfind(':') + 1) +
                        std::to_string(rendezvous->port());
  }
  return Launch(config, job).run();
}

}  // namespace ddprun::launcher

// ddprun: the per-node agent, a drop-in for torchrun. Parses torchrun's
// flags, hosts the workers' store, and supervises the local worker group.
// Exit status: 0 on success; the root-cause worker's exit code, or 128 +
// signal for a worker killed by a signal (as srun does); 128 + signal when
// ddprun itself was stopped by a handled signal; 2 for bad flags; 1 when it
// cannot start.
//
// Rendezvous: --standalone (and torchrun's single-node default), and static
// across nodes. c10d across nodes is not implemented yet and is refused with
// a clear message.
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "ddprun/launcher/agent.hpp"
#include "ddprun/launcher/cli.hpp"
#include "ddprun/launcher/device_count.hpp"
#include "ddprun/launcher/worker_command.hpp"
#include "ddprun/proto/errors.hpp"
#include "ddprun/rendezvous/server.hpp"
#include "elastic_node.hpp"
#include "node_rendezvous.hpp"
#include "worker_output.hpp"

extern char** environ;

namespace {

using namespace ddprun;
using launcher::LaunchConfig;

spdlog::logger& log() {
  static auto logger = spdlog::stderr_color_mt("ddprun");
  return *logger;
}

// torchrun's rules: gpu = the visible CUDA devices (an error if none),
// cpu = the CPU count, auto = GPUs if there are any, else CPUs.
int resolveNproc(const launcher::NprocPerNode& nproc) {
  using Kind = launcher::NprocPerNode::Kind;
  const int cpus = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  switch (nproc.kind) {
    case Kind::kCount:
      return nproc.count;
    case Kind::kCpu:
      return cpus;
    case Kind::kGpu: {
      const launcher::GpuCount gpus = launcher::countVisibleGpus();
      if (gpus.count == 0) {
        throw ConfigError("--nproc-per-node gpu: no CUDA GPU is visible: " + gpus.why_none);
      }
      return gpus.count;
    }
    case Kind::kAuto: {
      const int gpus = launcher::countVisibleGpus().count;
      return gpus > 0 ? gpus : cpus;
    }
    case Kind::kXpu:
      break;
  }
  throw ConfigError("--nproc-per-node xpu: Intel XPUs are not supported by ddprun");
}

std::vector<std::pair<std::string, std::string>> agentEnvironment() {
  std::vector<std::pair<std::string, std::string>> vars;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const std::string text = *entry;
    const auto eq = text.find('=');
    if (eq != std::string::npos) {
      vars.emplace_back(text.substr(0, eq), text.substr(eq + 1));
    }
  }
  return vars;
}

void setIfUnset(std::vector<std::pair<std::string, std::string>>& vars, std::string_view name,
                const std::string& value) {
  for (const auto& entry : vars) {
    if (entry.first == name) {
      return;
    }
  }
  vars.emplace_back(std::string(name), value);
}

std::string hostName() {
  char name[256] = {};
  gethostname(name, sizeof(name) - 1);
  return name;
}

namespace fs = std::filesystem;

// A parent that set TORCHELASTIC_ERROR_FILE on ddprun gets the root cause's.
void copyRootCauseError(const launcher::RunResult& result) {
  const char* own = std::getenv("TORCHELASTIC_ERROR_FILE");
  if (own == nullptr || result.failures.empty() ||
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

// Flags torchrun acts on that ddprun does not yet: refused, never ignored.
void refuseUnsupported(const LaunchConfig& config) {
  auto refuse = [](const std::string& flag) {
    throw ConfigError(flag + " is not supported by ddprun yet");
  };
  if (config.numa_binding) {
    refuse("--numa-binding");
  }
  if (config.virtual_local_rank) {
    refuse("--virtual-local-rank");
  }
  if (!config.duplicate_stdout_filters.empty() || !config.duplicate_stderr_filters.empty()) {
    refuse("--duplicate-stdout-filters/--duplicate-stderr-filters");
  }
  if (config.logs_specs) {
    refuse("--logs-specs");
  }
}

// The workers' group as this node's rendezvous decides it: fixed for
// --standalone and static, round by round for c10d across nodes.
struct NodePlace {
  std::unique_ptr<launcher::NodeRendezvous> fixed;
  std::unique_ptr<launcher::ElasticNode> elastic;
};

NodePlace joinRendezvous(const LaunchConfig& config, int nproc) {
  NodePlace place;
  const bool elastic = config.rdzv_backend == "c10d" && config.max_nodes > 1 &&
                       !config.standalone && !config.auto_standalone;
  if (elastic) {
    place.elastic = std::make_unique<launcher::ElasticNode>(config, nproc, hostName());
    if (place.elastic->hostsRendezvous()) {
      log().info("hosting the rendezvous at {}", config.rdzv_endpoint);
    }
  } else {
    place.fixed = std::make_unique<launcher::NodeRendezvous>(config, nproc);
  }
  return place;
}

// Logs every round this node joins, and the end of the job elsewhere.
launcher::ElasticHooks loggedRounds(launcher::ElasticHooks hooks, int nproc) {
  hooks.next_round = [next = std::move(hooks.next_round), nproc] {
    auto round = next();
    if (!round) {
      log().warn("the job was closed by another agent; stopping");
      return round;
    }
    log().info("round {}: node {} of {}, ranks {}..{} of {}, workers' store at {}:{}",
               round->attempt, round->group.group_rank, round->group.group_world_size,
               round->base_rank, round->base_rank + nproc - 1, round->group.world_size,
               round->group.master_addr, round->group.master_port);
    return round;
  };
  return hooks;
}

int runAgent(const LaunchConfig& config) {
  refuseUnsupported(config);
  const int nproc = resolveNproc(config.nproc_per_node);
  NodePlace place = joinRendezvous(config, nproc);

  auto env = agentEnvironment();
  if (nproc > 1 && std::getenv("OMP_NUM_THREADS") == nullptr) {
    log().warn(
        "Setting OMP_NUM_THREADS environment variable for each process to be 1 in default, to "
        "avoid your system being overloaded, please further tune the variable for optimal "
        "performance in your application as needed.");
    env.emplace_back("OMP_NUM_THREADS", "1");
  }
  setIfUnset(env, proto::env::kSignalsToHandle, config.signals_to_handle_text);
  const auto process_env = launcher::processEnvironment();

  launcher::AgentConfig agent_config;
  agent_config.nproc_per_node = nproc;
  agent_config.max_restarts = config.max_restarts;
  agent_config.shutdown_timeout = std::chrono::seconds(config.shutdown_grace_s);
  agent_config.signals_to_handle = config.signals_to_handle;
  agent_config.group =
      place.fixed ? place.fixed->group() : launcher::singleNodeGroup(config, nproc, "", 0);
  agent_config.group.max_restarts = config.max_restarts;
  if (place.elastic) {
    agent_config.elastic = loggedRounds(place.elastic->hooks(agent_config.group, nproc), nproc);
  }
  if (const char* nccl = std::getenv("TORCH_NCCL_ASYNC_ERROR_HANDLING")) {
    agent_config.group.nccl_async_error_handling = nccl;
  }
  agent_config.command = [&](int local_rank) {
    return launcher::workerCommand(config, local_rank, process_env);
  };
  agent_config.base_env = std::move(env);
  // 2.5+ workers do not prefix their keys per attempt: start each one empty.
  agent_config.before_attempt = [&place](int attempt) {
    if (place.fixed) {
      place.fixed->beforeAttempt(attempt);
    }
    if (attempt > 0 && place.fixed) {
      log().warn("restarting the worker group (attempt {})", attempt);
    }
  };
  agent_config.hostname = hostName();
  const std::filesystem::path run_dir = launcher::runLogDir(config);
  agent_config.output = [&config, run_dir, host = agent_config.hostname](int local_rank, int rank,
                                                                         int attempt) {
    return launcher::workerOutput(config, run_dir, host, local_rank, rank, attempt);
  };
  if (place.fixed) {
    const proto::WorkerEnv& group = place.fixed->group();
    log().info(
        "node {} of {}: starting {} worker(s) (ranks {}..{} of {}), store at {}:{}, run id {}, "
        "logs in {}",
        group.group_rank, group.group_world_size, nproc, group.group_rank * nproc,
        group.group_rank * nproc + nproc - 1, group.world_size, group.master_addr,
        group.master_port, config.rdzv_id, run_dir.string());
  } else {
    log().info("joined rendezvous '{}' at {} ({}:{} nodes), logs in {}", config.rdzv_id,
               config.rdzv_endpoint, config.min_nodes, config.max_nodes, run_dir.string());
  }
  const launcher::RunResult result = launcher::Agent(std::move(agent_config)).run();
  if (place.fixed) {
    if (auto gave_up = place.fixed->exitBarrier()) {
      log().warn("exit barrier: {}", *gave_up);
    }
  } else if (result.closed_elsewhere) {
    if (place.elastic->dropped()) {
      log().error(
          "the rendezvous dropped this node: no heartbeat reached it within keep_alive_interval "
          "x keep_alive_max_attempt (a network problem?); the job goes on without it");
      return result.exit_code != 0 ? result.exit_code : 1;
    }
    if (auto failed_on = place.elastic->failedOn()) {
      log().error("the job failed on {} (its restarts are spent); this node stops too", *failed_on);
      return result.exit_code != 0 ? result.exit_code : 1;
    }
  } else if (result.signal == 0) {
    // Done here (success, or restarts spent): end the job on every node. An
    // agent stopped by a signal leaves the run open for a replacement.
    if (auto warning = place.elastic->jobEnded(result.exit_code == 0)) {
      log().warn("{}", *warning);
    }
  }
  if (!result.failures.empty()) {
    std::fputs(launcher::formatFailureReport(result, hostName(), config.training_script).c_str(),
               stderr);
    copyRootCauseError(result);
  }
  return result.exit_code;
}

}  // namespace

int main(int argc, char** argv) {
  LaunchConfig config;
  try {
    config = launcher::parseCommandLine({argv + 1, argv + argc}, launcher::processEnvironment());
  } catch (const ConfigError& error) {
    std::fprintf(stderr, "ddprun: %s\n%s", error.what(), launcher::usage().c_str());
    return 2;
  }
  if (config.show_help) {
    std::fputs(launcher::helpText().c_str(), stdout);
    return 0;
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

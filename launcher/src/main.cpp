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
#include "ddprun/launcher/static_rendezvous.hpp"
#include "ddprun/launcher/worker_command.hpp"
#include "ddprun/proto/errors.hpp"
#include "ddprun/rendezvous/server.hpp"

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

// <log_dir>/<run_id>, or a fresh temporary directory's, as torchrun does.
fs::path runLogDir(const LaunchConfig& config) {
  fs::path base;
  if (config.log_dir) {
    base = *config.log_dir;
  } else {
    std::string pattern = (fs::temp_directory_path() / "ddprun_XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) {
      throw Error("cannot create a temporary log directory in " +
                  fs::temp_directory_path().string());
    }
    base = pattern;
  }
  fs::create_directories(base / config.rdzv_id);
  return base / config.rdzv_id;
}

// --log-line-prefix-template's placeholders, as torchrun expands them.
std::string expandPrefix(std::string text, const LaunchConfig& config, int local_rank, int rank,
                         const std::string& hostname) {
  const std::pair<std::string, std::string> values[] = {
      {"${role_name}", config.role},
      {"${local_rank}", std::to_string(local_rank)},
      {"${rank}", std::to_string(rank)},
      {"${hostname}", hostname}};
  for (const auto& [placeholder, value] : values) {
    for (auto at = text.find(placeholder); at != std::string::npos;
         at = text.find(placeholder, at + value.size())) {
      text.replace(at, placeholder.size(), value);
    }
  }
  return text;
}

// -r sends a stream to its file only, -t to its file and the console with
// a prefix, neither to the console only; --local-ranks-filter limits the
// console, never the files. Layout: <run>/attempt_N/<local_rank>/.
launcher::WorkerOutput workerOutput(const LaunchConfig& config, const fs::path& run_dir,
                                    const std::string& hostname, int local_rank, int rank,
                                    int attempt) {
  const fs::path dir =
      run_dir / ("attempt_" + std::to_string(attempt)) / std::to_string(local_rank);
  fs::create_directories(dir);
  const auto redirect = static_cast<int>(config.redirects.forLocalRank(local_rank));
  const auto tee = static_cast<int>(config.tee.forLocalRank(local_rank));
  const bool shown = !config.local_ranks_filter || config.local_ranks_filter->contains(local_rank);
  const std::string prefix =
      expandPrefix(config.log_line_prefix_template.value_or("[${role_name}${local_rank}]:"), config,
                   local_rank, rank, hostname);
  launcher::WorkerOutput output;
  output.error_file = (dir / "error.json").string();
  auto route = [&](int stream, const char* file, std::string& path, bool& console,
                   std::string& line_prefix) {
    const bool teed = (tee & stream) != 0;
    const bool redirected = (redirect & stream) != 0;
    path = teed || redirected ? (dir / file).string() : std::string();
    console = shown && (teed || !redirected);
    line_prefix = teed ? prefix : std::string();
  };
  route(static_cast<int>(launcher::Std::kOut), "stdout.log", output.stdout_file,
        output.stdout_to_console, output.stdout_prefix);
  route(static_cast<int>(launcher::Std::kErr), "stderr.log", output.stderr_file,
        output.stderr_to_console, output.stderr_prefix);
  return output;
}

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

// The rendezvous result for a single node, with the store this agent hosts.
proto::WorkerEnv singleNodeGroup(const LaunchConfig& config, int nproc,
                                 const std::string& master_addr, std::uint16_t master_port) {
  proto::WorkerEnv group;
  group.world_size = nproc;
  group.local_world_size = nproc;
  group.role_world_size = nproc;
  group.group_world_size = 1;
  group.role_name = config.role;
  group.master_addr = master_addr;
  group.master_port = master_port;
  group.run_id = config.rdzv_id;
  group.max_restarts = config.max_restarts;
  group.use_agent_store = true;  // workers are clients of the store this agent hosts
  return group;
}

// This node's store and place in the job. --standalone (and c10d on one
// node) hosts a private store on a free loopback port: no port race. static
// hosts the store on node 0's --master-port, or joins it, and derives ranks
// from --node-rank.
class NodeRendezvous {
 public:
  NodeRendezvous(const LaunchConfig& config, int nproc) {
    const bool single_c10d = config.rdzv_backend == "c10d" && config.max_nodes == 1;
    if (config.standalone || config.auto_standalone || single_c10d) {
      rdzv::ServerOptions options;
      options.host = "127.0.0.1";
      options.port = 0;
      store_ = std::make_unique<rdzv::Server>(options);
      store_->start();
      group_ = singleNodeGroup(config, nproc, "127.0.0.1", store_->port());
    } else if (config.rdzv_backend == "static") {
      static_ = std::make_unique<launcher::StaticRendezvous>(staticOptions(config, nproc));
      group_ = static_->join();
    } else {
      throw ConfigError("--rdzv-backend " + config.rdzv_backend + " across " +
                        std::to_string(config.max_nodes) +
                        " nodes is not implemented in ddprun yet (static is)");
    }
    group_.max_restarts = config.max_restarts;
  }

  const proto::WorkerEnv& group() const { return group_; }

  // 2.5+ workers do not prefix their keys per attempt: every attempt starts
  // on an empty store (on every node at once, for static).
  void beforeAttempt(int attempt) {
    if (store_) {
      store_->clearKeySpace();
    } else {
      static_->beforeAttempt(attempt);
    }
  }

  // Keeps node 0's store up until every node's workers are done.
  void exitBarrier() {
    if (!static_) {
      return;
    }
    try {
      static_->exitBarrier(std::chrono::seconds(300));
    } catch (const TimeoutError& error) {
      log().warn("exit barrier: {}", error.what());
    }
  }

 private:
  static launcher::StaticRendezvousOptions staticOptions(const LaunchConfig& config, int nproc) {
    launcher::StaticRendezvousOptions options;
    options.node_rank = config.node_rank;
    options.nnodes = config.max_nodes;  // torchrun's static world size
    options.nproc_per_node = nproc;
    options.master_addr = config.master_addr;
    options.master_port = static_cast<std::uint16_t>(config.master_port.value_or(29500));
    options.run_id = config.rdzv_id;
    options.role = config.role;
    if (auto timeout = config.rdzv_conf.find("timeout"); timeout != config.rdzv_conf.end()) {
      options.join_timeout = std::chrono::seconds(std::stoi(timeout->second));
    }
    return options;
  }

  std::unique_ptr<rdzv::Server> store_;
  std::unique_ptr<launcher::StaticRendezvous> static_;
  proto::WorkerEnv group_;
};

int runAgent(const LaunchConfig& config) {
  const int nproc = resolveNproc(config.nproc_per_node);
  NodeRendezvous rendezvous(config, nproc);

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
  agent_config.group = rendezvous.group();
  if (const char* nccl = std::getenv("TORCH_NCCL_ASYNC_ERROR_HANDLING")) {
    agent_config.group.nccl_async_error_handling = nccl;
  }
  agent_config.command = [&](int local_rank) {
    return launcher::workerCommand(config, local_rank, process_env);
  };
  agent_config.base_env = std::move(env);
  // 2.5+ workers do not prefix their keys per attempt: start each one empty.
  agent_config.before_attempt = [&rendezvous](int attempt) {
    rendezvous.beforeAttempt(attempt);
    if (attempt > 0) {
      log().warn("restarting the worker group (attempt {})", attempt);
    }
  };
  agent_config.hostname = hostName();
  const fs::path run_dir = runLogDir(config);
  agent_config.output = [&config, run_dir, host = agent_config.hostname](int local_rank, int rank,
                                                                         int attempt) {
    return workerOutput(config, run_dir, host, local_rank, rank, attempt);
  };
  const proto::WorkerEnv& group = rendezvous.group();
  log().info(
      "node {} of {}: starting {} worker(s) (ranks {}..{} of {}), store at {}:{}, run id {}, "
      "logs in {}",
      group.group_rank, group.group_world_size, nproc, group.group_rank * nproc,
      group.group_rank * nproc + nproc - 1, group.world_size, group.master_addr, group.master_port,
      config.rdzv_id, run_dir.string());
  const launcher::RunResult result = launcher::Agent(std::move(agent_config)).run();
  rendezvous.exitBarrier();
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

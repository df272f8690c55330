#include "derived_rules.hpp"

#include <algorithm>
#include <cctype>
#include <limits>
#include <utility>

#include "ddprun/launcher/core/option_values.hpp"
#include "ddprun/launcher/slurm/slurm_launch.hpp"
#include "ddprun/proto/env_contract.hpp"
#include "ddprun/proto/errors.hpp"
#include "operator_env.hpp"

namespace ddprun::launcher {
namespace {

constexpr int kStaticDefaultPort = 29500;
constexpr int kC10dDefaultPort = 29400;
constexpr int kEtcdDefaultPort = 2379;
constexpr int kDefaultShutdownGrace = 30;

bool fromSlurm(const LaunchConfig& config, std::string_view dest) {
  const auto found = config.sources.find(dest);
  return found != config.sources.end() && found->second.starts_with("slurm:");
}

void checkConflicts(const LaunchConfig& config) {
  // torchrun only checks this on the non-run-path branch (run.py get_entrypoint).
  if (!config.run_path && config.no_python && config.module) {
    throw ConfigError("--no-python and --module cannot be used together");
  }
}

// --standalone, or the single-node auto-port rule (pytorch/pytorch#175699):
// the backend is static (by value: argparse cannot tell an explicit
// "--rdzv-backend static" from the default), no endpoint, no master port
// from flag or PET_MASTER_PORT, and at most one node.
void applyStandalone(LaunchConfig& config, const RunIdGenerator& make_run_id) {
  const bool auto_port = !config.standalone && config.rdzv_backend == "static" &&
                         config.rdzv_endpoint.empty() && !config.master_port &&
                         config.max_nodes == 1;
  if (!config.standalone && !auto_port) {
    return;
  }
  config.auto_standalone = auto_port;
  config.rdzv_backend = "c10d";
  config.rdzv_endpoint = "localhost:0";
  config.rdzv_id = make_run_id();
  for (const char* dest : {"rdzv_backend", "rdzv_endpoint", "rdzv_id"}) {
    config.sources[dest] = "derived";
  }
}

void applyEndpoint(LaunchConfig& config) {
  const auto& backend = config.rdzv_backend;
  if (backend == "static") {
    const bool derived = config.rdzv_endpoint.empty();
    if (derived) {
      config.rdzv_endpoint = config.master_addr + ":" +
                             std::to_string(config.master_port.value_or(kStaticDefaultPort));
      config.sources["rdzv_endpoint"] = "derived";
    }
    const char* what = derived ? "--master-addr:--master-port" : "--rdzv-endpoint";
    config.rdzv_address = parseEndpoint(what, config.rdzv_endpoint, -1);
    if (config.rdzv_address->port < 0) {
      failValue(what, config.rdzv_endpoint, "the static backend needs a port (try --master-port)");
    }
  } else if (backend == "c10d") {
    config.rdzv_address = parseEndpoint(fromSlurm(config, "rdzv_endpoint")
                                            ? "the endpoint derived from SLURM_STEP_NODELIST"
                                            : "--rdzv-endpoint",
                                        config.rdzv_endpoint, kC10dDefaultPort);
  } else if (backend == "etcd-v3" || backend == "etcd" || backend == "etcd-v2") {
    // The etcd cluster's members, comma-separated: each is checked here; the
    // first stands for them all where one address is shown.
    config.rdzv_address.reset();
    std::size_t start = 0;
    do {
      const std::size_t comma = config.rdzv_endpoint.find(',', start);
      const Endpoint member = parseEndpoint(
          "--rdzv-endpoint", config.rdzv_endpoint.substr(start, comma - start), kEtcdDefaultPort);
      if (!config.rdzv_address) {
        config.rdzv_address = member;
      }
      start = comma == std::string::npos ? comma : comma + 1;
    } while (start != std::string::npos);
  }
}

// torchrun passes LOGLEVEL to Python's Logger.setLevel, which knows these
// names only, in capitals (anything else is a ValueError from torchrun); ddprun
// takes them in any case. NOTSET defers to Python's root logger: WARNING.
std::string logLevelOf(const std::string& value) {
  static const std::pair<const char*, const char*> kNames[] = {
      {"CRITICAL", "critical"}, {"FATAL", "critical"}, {"ERROR", "error"}, {"WARNING", "warning"},
      {"WARN", "warning"},      {"INFO", "info"},      {"DEBUG", "debug"}, {"NOTSET", "warning"}};
  std::string upper = value;
  std::transform(upper.begin(), upper.end(), upper.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  for (const auto& [python, spdlog_name] : kNames) {
    if (upper == python) {
      return spdlog_name;
    }
  }
  throw ConfigError("LOGLEVEL '" + value +
                    "': not a log level; use DEBUG, INFO, WARNING, ERROR or CRITICAL (as "
                    "torchrun's Python logging names them)");
}

// torchrun's agent reads TORCHELASTIC_HEALTH_CHECK_PORT and hands it to a
// health check server whose open-source version only logs that none was
// started (a value that is not an integer is logged and ignored). ddprun
// serves its /healthz there: the endpoint of --metrics-port, which it is
// when that flag is not given. A value that is not a port is refused.
void applyHealthCheckPort(LaunchConfig& config, const Environment& env) {
  constexpr std::string_view kHealthPort = "TORCHELASTIC_HEALTH_CHECK_PORT";
  const auto given = env(kHealthPort);
  if (!given || given->empty()) {
    return;
  }
  const int port = parseInt(kHealthPort, *given, 0, 65535);
  if (config.metrics_port && *config.metrics_port != port) {
    throw ConfigError(std::string(kHealthPort) + " " + *given + " and --metrics-port " +
                      std::to_string(*config.metrics_port) +
                      ": one endpoint serves /healthz and /metrics; give one port");
  }
  config.metrics_port = port;
  config.sources["metrics_port"] = "env:" + std::string(kHealthPort);
}

void applyEnvOnlyKnobs(LaunchConfig& config, const Environment& env) {
  if (const auto level = env("LOGLEVEL"); level && !level->empty()) {
    config.log_level = logLevelOf(*level);
    config.sources["log_level"] = "env:LOGLEVEL";
  }
  applyHealthCheckPort(config, env);
  if (!config.log_line_prefix_template) {
    const auto from_env = env("TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE");
    if (from_env && !from_env->empty()) {
      config.log_line_prefix_template = *from_env;
    }
  }
  config.shutdown_grace_s = kDefaultShutdownGrace;
  if (config.shutdown_timeout_s) {
    config.shutdown_grace_s = *config.shutdown_timeout_s;
  } else if (const auto from_env = env("TORCH_ELASTIC_SHUTDOWN_TIMEOUT")) {
    config.shutdown_grace_s =
        parseInt("TORCH_ELASTIC_SHUTDOWN_TIMEOUT", *from_env, 0, std::numeric_limits<int>::max());
    config.sources["shutdown_timeout"] = "env:TORCH_ELASTIC_SHUTDOWN_TIMEOUT";
  }
  // torch reads a value it cannot parse as 0, which turns its check off
  // unseen; ddprun refuses it, as any bad input.
  constexpr std::string_view kUninterruptible = "TORCHELASTIC_UNINTERRUPTIBLE_STATE_TIMEOUT";
  if (const auto from_env = env(kUninterruptible); from_env && !from_env->empty()) {
    config.uninterruptible_state_timeout_s = parseNonNegativeDouble(kUninterruptible, *from_env);
    config.sources["uninterruptible_state_timeout"] = "env:" + std::string(kUninterruptible);
  }
}

// torch's LocalElasticAgent serves its file timer when
// TORCHELASTIC_ENABLE_FILE_TIMER is "1", at TORCHELASTIC_TIMER_FILE or a new
// watchdog_timer_<uuid> in the temporary directory; the file alone enables
// nothing.
void applyFileTimer(LaunchConfig& config, const Environment& env) {
  if (env(proto::env::kEnableFileTimer) != "1") {
    return;
  }
  const auto given = env(proto::env::kTimerFile);
  if (given && !given->empty()) {
    config.timer_file = *given;
    return;
  }
  const auto tmpdir = env("TMPDIR");
  config.timer_file =
      (tmpdir && !tmpdir->empty() ? *tmpdir : "/tmp") + "/watchdog_timer_" + randomUuid();
}

void collectWarnings(LaunchConfig& config, bool endpoint_given) {
  // A --hostfile launch runs no agent here: these words about this process's
  // own rendezvous would not be about the job (its agents say theirs).
  if (config.rdzv_backend == "static" || config.hostfile) {
    return;
  }
  if (!endpoint_given) {
    config.warnings.push_back(
        "master_addr is only used for static rdzv_backend and when rdzv_endpoint is not "
        "specified.");
  }
  // Under Slurm every node's SLURM_NODEID is its rank: nothing to warn about.
  if (config.node_rank != 0 && !fromSlurm(config, "node_rank")) {
    // torchrun ignores it here; ddprun's c10d uses it to order the first round.
    config.warnings.push_back(
        "node_rank is only used for static rdzv_backend (torchrun ignores it with " +
        config.rdzv_backend + "); ddprun orders the first round by it, and ranks follow");
  }
}

}  // namespace

void applyDerivedRules(LaunchConfig& config, const Environment& env,
                       const RunIdGenerator& make_run_id) {
  checkConflicts(config);
  applySlurmRules(config, env);
  applyOperatorMaster(config, env);
  applyStandalone(config, make_run_id);
  const bool endpoint_given = !config.rdzv_endpoint.empty();
  applyEndpoint(config);
  applyEnvOnlyKnobs(config, env);
  applyFileTimer(config, env);
  collectWarnings(config, endpoint_given);
}

}  // namespace ddprun::launcher

#include "ddprun/launcher/config/launch_plan.hpp"

#include <nlohmann/json.hpp>

#include "ddprun/launcher/core/option_values.hpp"
#include "ddprun/proto/json_text.hpp"

namespace ddprun::launcher {
namespace {

using nlohmann::json;

std::string sourceOf(const LaunchConfig& config, std::string_view dest) {
  const auto found = config.sources.find(dest);
  return found == config.sources.end() ? "default" : found->second;
}

json field(const LaunchConfig& config, std::string_view dest, json value) {
  return {{"value", std::move(value)}, {"source", sourceOf(config, dest)}};
}

template <typename T>
json orNull(const std::optional<T>& value) {
  return value ? json(*value) : json(nullptr);
}

// --nproc-per-node as asked: a number, or the kind the agent resolved.
std::string askedNproc(const NprocPerNode& nproc) {
  switch (nproc.kind) {
    case NprocPerNode::Kind::kCount:
      return std::to_string(nproc.count);
    case NprocPerNode::Kind::kCpu:
      return "cpu";
    case NprocPerNode::Kind::kGpu:
      return "gpu";
    case NprocPerNode::Kind::kAuto:
      return "auto";
    case NprocPerNode::Kind::kGpusElseDefault:
      break;
  }
  return "gpu, else 1";
}

// The --rdzv-conf keys that were given, durations in seconds.
json rdzvConfJson(const RdzvConf& conf) {
  json out = json::object();
  const auto seconds = [&out](const char* key, const std::optional<RdzvConf::Duration>& value) {
    if (value) {
      out[key] = std::chrono::duration<double>(*value).count();
    }
  };
  seconds("timeout", conf.timeout);
  seconds("join_timeout", conf.join_timeout);
  seconds("last_call_timeout", conf.last_call_timeout);
  seconds("keep_alive_interval", conf.keep_alive_interval);
  seconds("close_timeout", conf.close_timeout);
  seconds("read_timeout", conf.read_timeout);
  seconds("heartbeat_timeout", conf.heartbeat_timeout);
  seconds("quarantine_seconds", conf.quarantine_seconds);
  if (conf.quarantine_after) {
    out["quarantine_after"] = *conf.quarantine_after;
  }
  if (conf.keep_alive_max_attempt) {
    out["keep_alive_max_attempt"] = *conf.keep_alive_max_attempt;
  }
  if (conf.is_host) {
    out["is_host"] = *conf.is_host;
  }
  if (conf.token_file) {
    out["token_file"] = *conf.token_file;
  }
  for (const auto& [key, value] : conf.etcd) {
    out[key] = value;
  }
  return out;
}

json slurmJson(const LaunchConfig& config) {
  if (!config.slurm) {
    return nullptr;
  }
  return {{"job_id", config.slurm->job_id},
          {"step_id", config.slurm->step_id},
          {"node_list", config.slurm->node_list}};
}

json rendezvousFields(const LaunchConfig& config) {
  return {
      {"nnodes", field(config, "nnodes", {{"min", config.min_nodes}, {"max", config.max_nodes}})},
      {"node_rank", field(config, "node_rank", config.node_rank)},
      {"standalone",
       {{"value", config.standalone || config.auto_standalone},
        {"source", config.auto_standalone ? "derived" : sourceOf(config, "standalone")}}},
      {"rdzv_backend", field(config, "rdzv_backend", config.rdzv_backend)},
      {"rdzv_endpoint", field(config, "rdzv_endpoint", config.rdzv_endpoint)},
      {"rdzv_id", field(config, "rdzv_id", config.rdzv_id)},
      {"rdzv_conf", field(config, "rdzv_conf", rdzvConfJson(config.rdzv_conf))},
      {"master_addr", field(config, "master_addr", config.master_addr)},
      {"master_port", field(config, "master_port", orNull(config.master_port))},
      {"local_addr", field(config, "local_addr", orNull(config.local_addr))},
      {"slurm", slurmJson(config)},
  };
}

}  // namespace

std::string launchPlanJson(const LaunchConfig& config, const ResolvedLaunch& resolved) {
  json plan = rendezvousFields(config);
  json nproc = field(config, "nproc_per_node", resolved.nproc);
  nproc["asked"] = askedNproc(config.nproc_per_node);
  plan["nproc_per_node"] = std::move(nproc);
  plan["max_restarts"] = field(config, "max_restarts", config.max_restarts);
  plan["role"] = field(config, "role", config.role);
  plan["log_dir"] = field(config, "log_dir", orNull(config.log_dir));
  plan["shutdown_timeout"] = field(config, "shutdown_timeout", config.shutdown_grace_s);
  plan["uninterruptible_state_timeout"] = field(config, "uninterruptible_state_timeout",
                                                orNull(config.uninterruptible_state_timeout_s));
  plan["signals_to_handle"] = field(config, "signals_to_handle", config.signals_to_handle_text);
  plan["numa_binding"] =
      field(config, "numa_binding",
            config.numa_binding ? json(std::string(numaBindingName(*config.numa_binding)))
                                : json(nullptr));
  plan["worker_hang_timeout"] =
      field(config, "worker_hang_timeout", orNull(config.worker_hang_timeout_s));
  plan["max_unproductive_restarts"] =
      field(config, "max_unproductive_restarts", config.max_unproductive_restarts);
  plan["progress_timeout"] =
      field(config, "progress_timeout",
            config.progress_timeout ? json(config.progress_timeout->describe(2)) : json(nullptr));
  json python = {{"value", resolved.python.empty() ? json(nullptr) : json(resolved.python)},
                 {"source", resolved.python.empty() ? "default" : resolved.python_source}};
  plan["python"] = std::move(python);
  plan["worker_command"] = {{"value", resolved.worker_argv}, {"source", "flag"}};
  return proto::jsonText(plan);
}

}  // namespace ddprun::launcher

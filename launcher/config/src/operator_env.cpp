#include "operator_env.hpp"

#include <utility>

#include "ddprun/launcher/core/option_values.hpp"
#include "ddprun/proto/visible_text.hpp"

namespace ddprun::launcher {
namespace {

constexpr std::string_view kStandalone = "PET_STANDALONE";
constexpr std::string_view kNproc = "PET_NPROC_PER_NODE";
constexpr std::string_view kOldNproc = "PET_N_PROC_PER_NODE";

bool suppliedFrom(const LaunchConfig& config, std::string_view dest, std::string_view source) {
  const auto found = config.sources.find(dest);
  return found != config.sources.end() && found->second == source;
}

}  // namespace

Environment withOperatorSpellings(Environment env) {
  return [env = std::move(env)](std::string_view name) -> std::optional<std::string> {
    auto value = env(name);
    if (name == kStandalone && value && value->empty()) {
      return "1";
    }
    if (name == kNproc && !value) {
      return env(kOldNproc);
    }
    return value;
  };
}

void noteOperatorSpellings(LaunchConfig& config, const Environment& env) {
  const auto standalone = env(kStandalone);
  if (suppliedFrom(config, "standalone", "env:PET_STANDALONE") && standalone &&
      standalone->empty()) {
    config.warnings.push_back(
        "PET_STANDALONE is set and empty, as Kubeflow's PyTorchJob operator writes it for "
        "elasticPolicy.standalone: taken as --standalone (torchrun fails on it)");
  }
  if (suppliedFrom(config, "nproc_per_node", "env:PET_NPROC_PER_NODE") && !env(kNproc)) {
    config.sources["nproc_per_node"] = "env:PET_N_PROC_PER_NODE";
    config.warnings.push_back("PET_N_PROC_PER_NODE=" + proto::visible(env(kOldNproc).value_or("")) +
                              ", the spelling of Kubeflow's PyTorchJob operator before v1.7: "
                              "taken as --nproc-per-node (torchrun reads only PET_NPROC_PER_NODE)");
  }
}

void applyOperatorMaster(LaunchConfig& config, const Environment& env) {
  const auto addr = env("MASTER_ADDR");
  if (config.hostfile || config.rdzv_backend != "static" || !config.rdzv_endpoint.empty() ||
      config.max_nodes < 2 || config.sources.contains("master_addr") || !addr || addr->empty()) {
    return;
  }
  config.master_addr = *addr;
  config.sources["master_addr"] = "env:MASTER_ADDR";
  std::string taken = "MASTER_ADDR=" + proto::visible(*addr);
  const auto port = env("MASTER_PORT");
  if (!config.master_port && port && !port->empty()) {
    config.master_port = parseInt("MASTER_PORT", *port, 0, 65535);
    config.sources["master_port"] = "env:MASTER_PORT";
    taken += " and MASTER_PORT=" + proto::visible(*port);
  }
  config.warnings.push_back(
      "a static job of " + std::to_string(config.max_nodes) +
      " nodes with no --master-addr: meeting at " + taken +
      " from the environment, where Kubeflow's PyTorchJob operator names the master (torchrun "
      "would wait at 127.0.0.1 alone)");
}

}  // namespace ddprun::launcher

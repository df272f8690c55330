// The Slurm rules (docs/torchrun-contract.md §3.12). Which variable srun sets
// for a step is srun(1)'s OUTPUT ENVIRONMENT VARIABLES; sbatch(1)'s lists what
// a batch script has (no SLURM_STEP_*).
#include "ddprun/launcher/slurm/slurm_launch.hpp"

#include <algorithm>
#include <limits>
#include <regex>

#include "ddprun/launcher/core/option_values.hpp"
#include "ddprun/launcher/slurm/slurm_hostlist.hpp"

namespace ddprun::launcher {
namespace {

constexpr int kIntMax = std::numeric_limits<int>::max();
constexpr const char* kStepNodeList = "SLURM_STEP_NODELIST";

std::optional<std::string> nonEmpty(const Environment& env, std::string_view name) {
  auto value = env(name);
  if (!value || value->empty()) {
    return std::nullopt;
  }
  return value;
}

[[noreturn]] void failVariable(std::string_view variable, std::string_view text,
                               std::string_view why) {
  throw SlurmError(std::string(variable) + " '" + std::string(text) + "': " + std::string(why));
}

int integerOf(std::string_view variable, const std::string& text, int min) {
  try {
    return parseInt(variable, text, min, kIntMax);
  } catch (const ConfigError& error) {
    throw SlurmError(error.what());
  }
}

std::string digitsOf(std::string_view variable, const std::string& text) {
  if (!std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    failVariable(variable, text, "expected a number");
  }
  return text;
}

// A number's remainder modulo the span, digit by digit: ids have no length
// limit here.
int remainderOf(const std::string& digits) {
  int remainder = 0;
  for (const char digit : digits) {
    remainder = (remainder * 10 + (digit - '0')) % kSlurmPortSpan;
  }
  return remainder;
}

int portFor(const std::string& job_id, const std::string& step_id) {
  const long long step = remainderOf(step_id);
  return kSlurmPortBase +
         static_cast<int>((remainderOf(job_id) + step * kSlurmStepStride) % kSlurmPortSpan);
}

void readNodeCount(const Environment& env, SlurmStep& step) {
  for (const char* variable : {"SLURM_STEP_NUM_NODES", "SLURM_NNODES", "SLURM_JOB_NUM_NODES"}) {
    if (const auto text = nonEmpty(env, variable)) {
      step.nodes = integerOf(variable, *text, 1);
      step.nodes_variable = variable;
      return;
    }
  }
  step.nodes = static_cast<int>(hostCount(step.node_list));  // at most kMaxHostsInList
  step.nodes_variable = kStepNodeList;
}

// The largest count in SLURM_STEP_TASKS_PER_NODE's "2(x3),1" form.
int mostTasksOnANode(const std::string& text) {
  static const std::regex kItem(R"((\d{1,9})(\(x\d{1,9}\))?)");
  int most = 0;
  std::size_t start = 0;
  while (start <= text.size()) {
    const auto comma = std::min(text.find(',', start), text.size());
    std::smatch match;
    const std::string item = text.substr(start, comma - start);
    if (!std::regex_match(item, match, kItem)) {
      failVariable("SLURM_STEP_TASKS_PER_NODE", text, "expected counts such as 2(x3),1");
    }
    most = std::max(most, std::stoi(match[1].str()));
    start = comma + 1;
  }
  return most;
}

[[noreturn]] void refuseSeveralTasks(const SlurmStep& step, const std::string& what) {
  throw SlurmError("Slurm step " + step.job_id + (step.step_id.empty() ? "" : "." + step.step_id) +
                   " runs " + what +
                   ", but ddprun starts every worker of its node itself and needs one task per "
                   "node: launch it with `srun --ntasks-per-node=1 ddprun ...` (or --no-slurm "
                   "and a rendezvous of your own)");
}

bool given(const LaunchConfig& config, std::string_view dest) {
  return config.sources.contains(dest);
}

// A hand-wired rendezvous (a torchrun-style job script) is left exactly as
// it would be without Slurm.
bool userChoseRendezvous(const LaunchConfig& config) {
  return config.standalone || given(config, "rdzv_backend") ||
         (given(config, "rdzv_endpoint") && !config.rdzv_endpoint.empty()) ||
         given(config, "master_addr") || given(config, "master_port");
}

// ddprun straight from a batch script sees the job's nodes but runs on the
// first one only; said once, since that is rarely what a job of several
// nodes wants.
void warnOutsideSrun(LaunchConfig& config, const Environment& env) {
  static const std::regex kSeveral(R"([1-9]\d{0,8})");
  const auto job = nonEmpty(env, "SLURM_JOB_ID");
  const char* variable = env("SLURM_JOB_NUM_NODES") ? "SLURM_JOB_NUM_NODES" : "SLURM_NNODES";
  const auto nodes = nonEmpty(env, variable);
  if (!job || !nodes || !std::regex_match(*nodes, kSeveral) || *nodes == "1") {
    return;
  }
  config.warnings.push_back("Slurm job " + *job + " has " + *nodes + " nodes (" + variable +
                            "), but this ddprun was not started by srun (no " + kStepNodeList +
                            "), so it launches on this node only; to use every node, run "
                            "`srun --ntasks-per-node=1 ddprun ...` in the job script");
}

void deriveFrom(const SlurmStep& step, LaunchConfig& config) {
  const auto from = [&config](const std::string& dest, const std::string& variable) {
    config.sources[dest] = "slurm:" + variable;
  };
  if (!given(config, "nnodes")) {
    config.min_nodes = config.max_nodes = step.nodes;
    from("nnodes", step.nodes_variable);
  }
  config.rdzv_backend = "c10d";
  from("rdzv_backend", kStepNodeList);
  config.rdzv_endpoint = formatEndpoint(step.first_host, step.port);
  from("rdzv_endpoint", kStepNodeList);
  if (!given(config, "rdzv_id")) {
    config.rdzv_id = step.runId();
    from("rdzv_id", "SLURM_JOB_ID");
  }
  if (!given(config, "node_rank") && step.node_id) {
    config.node_rank = *step.node_id;
    from("node_rank", "SLURM_NODEID");
  }
  if (!given(config, "nproc_per_node")) {
    if (step.gpus_on_node) {
      config.nproc_per_node = {NprocPerNode::Kind::kCount, *step.gpus_on_node};
      from("nproc_per_node", "SLURM_GPUS_ON_NODE");
    } else {
      config.nproc_per_node = {NprocPerNode::Kind::kGpusElseDefault, 0};
      config.sources["nproc_per_node"] = "derived";
    }
  }
  config.slurm = SlurmStepInfo{step.job_id, step.step_id, step.node_list};
}

// "(SLURM_NODEID)", "(--nproc-per-node)", "(PET_NNODES)", "(default)".
std::string originOf(const LaunchConfig& config, std::string_view dest) {
  const auto found = config.sources.find(dest);
  if (found == config.sources.end()) {
    return "(default)";
  }
  const std::string& source = found->second;
  if (source == "flag") {
    std::string flag = "--" + std::string(dest);
    std::replace(flag.begin(), flag.end(), '_', '-');
    return "(" + flag + ")";
  }
  const auto colon = source.find(':');
  return "(" + (colon == std::string::npos ? source : source.substr(colon + 1)) + ")";
}

std::string counted(int count, const std::string& noun) {
  return std::to_string(count) + " " + noun + (count == 1 ? "" : "s");
}

}  // namespace

std::string SlurmStep::runId() const {
  return "slurm-" + job_id + (step_id.empty() ? "" : "." + step_id);
}

std::optional<SlurmStep> readSlurmStep(const Environment& env) {
  const auto job_id = nonEmpty(env, "SLURM_JOB_ID");
  const auto node_list = env(kStepNodeList);
  if (!job_id || !node_list) {
    return std::nullopt;
  }
  SlurmStep step;
  step.job_id = digitsOf("SLURM_JOB_ID", *job_id);
  if (const auto step_id = nonEmpty(env, "SLURM_STEP_ID")) {
    step.step_id = digitsOf("SLURM_STEP_ID", *step_id);
  }
  step.node_list = *node_list;
  try {
    step.first_host = firstHost(step.node_list);
  } catch (const HostlistError& error) {
    failVariable(kStepNodeList, step.node_list, error.reason());
  }
  readNodeCount(env, step);
  if (const auto node_id = nonEmpty(env, "SLURM_NODEID")) {
    step.node_id = integerOf("SLURM_NODEID", *node_id, 0);
  }
  if (const auto gpus = nonEmpty(env, "SLURM_GPUS_ON_NODE")) {
    if (const int count = integerOf("SLURM_GPUS_ON_NODE", *gpus, 0); count > 0) {
      step.gpus_on_node = count;
    }
  }
  step.port = portFor(step.job_id, step.step_id);
  return step;
}

void requireOneTaskPerNode(const SlurmStep& step, const Environment& env) {
  if (const auto per_node = nonEmpty(env, "SLURM_STEP_TASKS_PER_NODE")) {
    if (const int most = mostTasksOnANode(*per_node); most > 1) {
      refuseSeveralTasks(
          step, counted(most, "task") + " on a node (SLURM_STEP_TASKS_PER_NODE=" + *per_node + ")");
    }
  }
  for (const char* variable : {"SLURM_STEP_NUM_TASKS", "SLURM_NTASKS"}) {
    if (const auto tasks = nonEmpty(env, variable)) {
      if (const int count = integerOf(variable, *tasks, 1); count > step.nodes) {
        refuseSeveralTasks(step, counted(count, "task") + " on " + counted(step.nodes, "node") +
                                     " (" + variable + "=" + *tasks + ")");
      }
      return;
    }
  }
}

void applySlurmRules(LaunchConfig& config, const Environment& env) {
  if (config.no_slurm || userChoseRendezvous(config)) {
    return;
  }
  const auto step = readSlurmStep(env);
  if (!step) {
    warnOutsideSrun(config, env);
    return;
  }
  // Started by a worker of another launch (a script that runs ddprun): the
  // step, its run id and its port are that launch's; deriving them would
  // join its rendezvous.
  if (const auto outer = nonEmpty(env, "TORCHELASTIC_RUN_ID")) {
    config.warnings.push_back(
        "this ddprun runs inside a worker of run '" + *outer +
        "' (TORCHELASTIC_RUN_ID is set), whose Slurm step it shares: nothing is derived from "
        "Slurm; it launches on this node only unless rendezvous flags say otherwise");
    return;
  }
  requireOneTaskPerNode(*step, env);
  deriveFrom(*step, config);
}

std::string describeSlurmLaunch(const LaunchConfig& config, int nproc, bool gpus_visible) {
  const SlurmStepInfo& step = *config.slurm;
  std::string line =
      "Slurm job " + step.job_id + (step.step_id.empty() ? "" : " step " + step.step_id) + ": ";
  line += (config.min_nodes == config.max_nodes ? counted(config.max_nodes, "node")
                                                : std::to_string(config.min_nodes) + ":" +
                                                      std::to_string(config.max_nodes) + " nodes") +
          " " + originOf(config, "nnodes");
  line += ", node rank " + std::to_string(config.node_rank) + " " + originOf(config, "node_rank");
  if (config.max_nodes == 1) {
    line += ", c10d on this node alone (no rendezvous needed)";
  } else {
    line += ", c10d rendezvous at " + config.rdzv_endpoint + " (first host of " + kStepNodeList +
            "; port from SLURM_JOB_ID and SLURM_STEP_ID)";
  }
  line += ", run id " + config.rdzv_id;
  if (const std::string origin = originOf(config, "rdzv_id"); origin != "(SLURM_JOB_ID)") {
    line += " " + origin;
  }
  std::string nproc_origin = originOf(config, "nproc_per_node");
  if (config.nproc_per_node.kind == NprocPerNode::Kind::kGpusElseDefault) {
    nproc_origin = gpus_visible ? "(visible GPUs; no SLURM_GPUS_ON_NODE)"
                                : "(no GPU visible nor SLURM_GPUS_ON_NODE: torchrun's default)";
  }
  return line + ", " + counted(nproc, "worker") + " per node " + nproc_origin;
}

}  // namespace ddprun::launcher

// multihostJob() and the --dry-run plan: what a --hostfile launch runs,
// before anything is started.
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "ddprun/launcher/config/cli.hpp"
#include "ddprun/launcher/config/option_table.hpp"
#include "ddprun/launcher/core/environment.hpp"
#include "ddprun/launcher/multihost/multihost_launch.hpp"
#include "ddprun/proto/errors.hpp"

namespace ddprun::launcher {
namespace {

// The options a --hostfile launch sets itself, by dest: given, they would
// contradict it (refused), or they are the launcher's own (not passed on).
constexpr std::string_view kRefused[] = {"nproc_per_node", "node_rank",  "master_addr",
                                         "master_port",    "standalone", "local_addr"};
constexpr std::string_view kLaunchersOwn[] = {
    "hostfile", "include",      "exclude",       "ssh_command", "dry_run",
    "nnodes",   "rdzv_backend", "rdzv_endpoint", "rdzv_id",     "stdin_hangup"};

template <std::size_t N>
bool listed(const std::string_view (&names)[N], std::string_view dest) {
  return std::find(std::begin(names), std::end(names), dest) != std::end(names);
}

// Whether the user gave `dest` (a flag or its PET_ variable), not a rule.
bool given(const LaunchConfig& config, std::string_view dest) {
  const auto found = config.sources.find(dest);
  return found != config.sources.end() &&
         (found->second == "flag" || found->second.starts_with("env:"));
}

// Every spelling of every option, to its spec.
const std::map<std::string, const OptionSpec*>& specsBySpelling() {
  static const auto table = [] {
    std::map<std::string, const OptionSpec*> specs;
    for (const OptionSpec& spec : optionTable()) {
      for (const std::string& name : spellings(spec)) {
        specs[name] = &spec;
      }
    }
    return specs;
  }();
  return table;
}

// The user's options an agent gets as given: `option_args` less the
// launcher's own. Refuses those a --hostfile launch cannot honour.
std::vector<std::string> agentOptions(const LaunchConfig& config) {
  std::vector<std::string> kept;
  const auto& args = config.option_args;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const auto found = specsBySpelling().find(args[i]);
    if (found == specsBySpelling().end()) {
      kept.push_back(args[i]);  // not an option name: cannot happen after parsing
      continue;
    }
    const OptionSpec& spec = *found->second;
    const std::size_t width = spec.is_flag ? 1 : 2;
    if (!listed(kRefused, spec.dest) && !listed(kLaunchersOwn, spec.dest)) {
      kept.insert(kept.end(), args.begin() + static_cast<std::ptrdiff_t>(i),
                  args.begin() + static_cast<std::ptrdiff_t>(std::min(i + width, args.size())));
    }
    i += width - 1;
  }
  return kept;
}

std::string nnodesOf(const LaunchConfig& config, std::size_t hosts) {
  const int count = static_cast<int>(hosts);
  if (!given(config, "nnodes")) {
    return std::to_string(count);
  }
  if (config.min_nodes > count || config.max_nodes < count) {
    throw ConfigError("--nnodes " + std::to_string(config.min_nodes) + ":" +
                      std::to_string(config.max_nodes) + " with --hostfile: the hostfile selects " +
                      std::to_string(count) + " host(s)");
  }
  return config.min_nodes == config.max_nodes
             ? std::to_string(count)
             : std::to_string(config.min_nodes) + ":" + std::to_string(config.max_nodes);
}

// A flag, or its PET_ variable, that contradicts the launch is refused.
void refuseContradictions(const LaunchConfig& config) {
  for (const OptionSpec& spec : optionTable()) {
    if (!listed(kRefused, spec.dest) || !given(config, spec.dest)) {
      continue;
    }
    const std::string& source = config.sources.at(spec.dest);
    const std::string named = source == "flag"
                                  ? canonicalFlag(spec)
                                  : source.substr(4) + " (" + canonicalFlag(spec) + ")";
    throw ConfigError(named +
                      " cannot be used with --hostfile: the hostfile says how many workers each "
                      "host runs, and the launch sets the rendezvous");
  }
}

// What the agents would read from the PET_ variables passed on, but is the
// launch's to set: dropped from what they get.
void dropLaunchersOwn(std::vector<std::pair<std::string, std::string>>& exported) {
  for (const OptionSpec& spec : optionTable()) {
    if (spec.env_backed && (listed(kLaunchersOwn, spec.dest) || listed(kRefused, spec.dest))) {
      std::erase_if(exported,
                    [&](const auto& variable) { return variable.first == petName(spec); });
    }
  }
}

}  // namespace

bool hostsRendezvous(const LaunchConfig& config) { return !given(config, "rdzv_endpoint"); }

MultihostJob multihostJob(const LaunchConfig& config, const Environment& env,
                          const std::vector<std::string>& names) {
  if (given(config, "rdzv_backend") && config.rdzv_backend != "c10d") {
    throw ConfigError("--rdzv-backend " + config.rdzv_backend +
                      " with --hostfile: the launch runs a c10d rendezvous");
  }
  refuseContradictions(config);
  MultihostJob job;
  const std::vector<HostSlots> hosts = readHostfile(*config.hostfile);
  job.hosts = selectHosts(hosts, config.include_hosts, config.exclude_hosts);
  for (const SelectedHost& selected : job.hosts) {
    const auto host = std::find_if(hosts.begin(), hosts.end(),
                                   [&](const HostSlots& h) { return h.host == selected.host; });
    job.all_slots.push_back(host->slots);
  }
  job.nnodes = nnodesOf(config, job.hosts.size());
  // Hosted here: on a free port, chosen when the launch binds it (0 until then).
  job.rdzv_endpoint = hostsRendezvous(config) ? thisHostName() + ":0" : config.rdzv_endpoint;
  job.rdzv_id = given(config, "rdzv_id") ? config.rdzv_id : randomUuid();
  job.agent_options = agentOptions(config);
  job.program = {config.training_script};
  job.program.insert(job.program.end(), config.training_script_args.begin(),
                     config.training_script_args.end());
  job.working_dir = std::filesystem::current_path().string();
  job.exported =
      exportedVariables(names, env, env("HOME").value_or(""), job.working_dir, job.secret);
  dropLaunchersOwn(job.exported);
  job.ssh_command = config.ssh_command;
  job.local_ddprun = std::filesystem::read_symlink("/proc/self/exe").string();
  return job;
}

std::string multihostPlanJson(const LaunchConfig& config, const MultihostJob& job) {
  nlohmann::ordered_json hosts = nlohmann::ordered_json::array();
  for (const HostAgent& agent : planHostAgents(job)) {
    hosts.push_back({{"host", agent.host},
                     {"slots", agent.slots},
                     {"over_ssh", agent.over_ssh},
                     {"command", agent.shown}});
  }
  const nlohmann::ordered_json plan = {
      {"hostfile", *config.hostfile},
      {"nnodes", job.nnodes},
      {"rdzv_endpoint", job.rdzv_endpoint},
      {"rendezvous_hosted_here", hostsRendezvous(config)},
      {"rdzv_port",
       hostsRendezvous(config) ? "a free port, chosen at launch (0 here)" : "the endpoint's"},
      {"rdzv_id", job.rdzv_id},
      {"hosts", hosts}};
  return plan.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

}  // namespace ddprun::launcher

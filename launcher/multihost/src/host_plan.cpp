#include "ddprun/launcher/multihost/host_plan.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>

namespace ddprun::launcher {
namespace {

constexpr std::string_view kExportedPrefixes[] = {"NCCL_", "GLOO_",  "PYTHON",
                                                  "CUDA_", "TORCH_", "PET_"};
constexpr std::string_view kExportedNames[] = {"PATH", "LD_LIBRARY_PATH", "VIRTUAL_ENV",
                                               "CONDA_PREFIX", "LOGLEVEL"};
constexpr std::string_view kEnvFile = ".ddprun_env";

bool exported(std::string_view name) {
  if (name == "CUDA_VISIBLE_DEVICES") {
    return false;  // a host's GPUs are its own; the selection sets it
  }
  return std::any_of(std::begin(kExportedPrefixes), std::end(kExportedPrefixes),
                     [&](std::string_view prefix) { return name.starts_with(prefix); }) ||
         std::find(std::begin(kExportedNames), std::end(kExportedNames), name) !=
             std::end(kExportedNames);
}

// KEY=VALUE lines of `file` (blank lines and '#' comments skipped), into `into`.
void readEnvFile(const std::filesystem::path& file, std::map<std::string, std::string>& into) {
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);) {
    const auto equals = line.find('=');
    if (line.empty() || line.front() == '#' || equals == std::string::npos || equals == 0) {
      continue;
    }
    into[line.substr(0, equals)] = line.substr(equals + 1);
  }
}

std::string joined(const std::vector<int>& slots) {
  std::string text;
  for (int slot : slots) {
    text += (text.empty() ? "" : ",") + std::to_string(slot);
  }
  return text;
}

// The agent's own ddprun arguments, after `ddprun`.
std::vector<std::string> agentArguments(const MultihostJob& job, const SelectedHost& host,
                                        bool over_ssh) {
  std::vector<std::string> args;
  if (over_ssh) {
    args.push_back("--stdin-hangup");  // a dropped session stops it
  }
  args.insert(
      args.end(),
      {"--nnodes=" + job.nnodes, "--nproc-per-node=" + std::to_string(host.slots.size()),
       "--rdzv-backend=c10d", "--rdzv-endpoint=" + job.rdzv_endpoint, "--rdzv-id=" + job.rdzv_id});
  args.insert(args.end(), job.agent_options.begin(), job.agent_options.end());
  args.insert(args.end(), job.program.begin(), job.program.end());
  return args;
}

}  // namespace

std::string shellQuoted(const std::string& word) {
  const bool plain = !word.empty() && std::all_of(word.begin(), word.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0 ||
           std::string_view("@%_+=:,./-").find(c) != std::string_view::npos;
  });
  if (plain) {
    return word;
  }
  std::string quoted = "'";
  for (char c : word) {
    quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  }
  return quoted + "'";
}

std::vector<std::pair<std::string, std::string>> exportedVariables(
    const std::vector<std::string>& names, const Environment& env, const std::string& home,
    const std::string& working_dir, std::set<std::string>& secret) {
  std::vector<std::pair<std::string, std::string>> variables;
  for (const std::string& name : names) {
    if (exported(name)) {
      if (const auto value = env(name)) {
        variables.emplace_back(name, *value);
      }
    }
  }
  std::map<std::string, std::string> from_files;
  if (!home.empty()) {
    readEnvFile(std::filesystem::path(home) / kEnvFile, from_files);
  }
  readEnvFile(std::filesystem::path(working_dir) / kEnvFile, from_files);
  for (const auto& entry : from_files) {
    const std::string& name = entry.first;
    std::erase_if(variables, [&](const auto& variable) { return variable.first == name; });
    variables.emplace_back(name, entry.second);
    secret.insert(name);
  }
  return variables;
}

std::vector<HostAgent> planHostAgents(const MultihostJob& job) {
  std::vector<HostAgent> agents;
  for (std::size_t i = 0; i < job.hosts.size(); ++i) {
    const SelectedHost& host = job.hosts[i];
    HostAgent agent{host.host, host.slots, host.host != "localhost", {}, {}, {}};
    std::vector<std::pair<std::string, std::string>> env = job.exported;
    // Only a narrowed host is told its GPUs: a host used whole keeps its own view.
    if (static_cast<int>(host.slots.size()) != job.all_slots[i]) {
      env.emplace_back("CUDA_VISIBLE_DEVICES", joined(host.slots));
    }
    const std::vector<std::string> args = agentArguments(job, host, agent.over_ssh);
    std::string command = "cd " + shellQuoted(job.working_dir) + " && exec env";
    std::string shown = command;
    for (const auto& [name, value] : env) {
      std::string assignment = name;
      assignment += '=';
      assignment += value;
      command += " " + shellQuoted(assignment);
      shown += " " +
               (job.secret.contains(name) ? name + "=<from .ddprun_env>" : shellQuoted(assignment));
    }
    // A remote host runs the ddprun its PATH (the one exported) finds; a
    // local agent is this executable.
    const std::string tail =
        " " + (agent.over_ssh ? std::string("ddprun") : shellQuoted(job.local_ddprun));
    command += tail;
    shown += tail;
    for (const std::string& arg : args) {
      command += " " + shellQuoted(arg);
      shown += " " + shellQuoted(arg);
    }
    if (agent.over_ssh) {
      agent.argv = job.ssh_command;
      agent.argv.push_back(host.host);
      agent.argv.push_back(command);
      std::string ssh;
      for (const std::string& word : job.ssh_command) {
        ssh += shellQuoted(word) + " ";
      }
      agent.shown = ssh + shellQuoted(host.host) + " " + shellQuoted(shown);
    } else {
      agent.argv = {job.local_ddprun};
      agent.argv.insert(agent.argv.end(), args.begin(), args.end());
      agent.env = std::move(env);
      agent.shown = shown;
    }
    agents.push_back(std::move(agent));
  }
  return agents;
}

}  // namespace ddprun::launcher

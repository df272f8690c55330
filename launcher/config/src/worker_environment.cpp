#include "ddprun/launcher/config/worker_environment.hpp"

#include <map>
#include <optional>
#include <sstream>

#include "ddprun/launcher/core/environment.hpp"
#include "ddprun/launcher/core/rendezvous.hpp"
#include "ddprun/launcher/host/socket_interface.hpp"
#include "ddprun/proto/errors.hpp"

namespace ddprun::launcher {
namespace {

constexpr const char* kOmpWarning =
    "Setting OMP_NUM_THREADS environment variable for each process to be 1 in default, to avoid "
    "your system being overloaded, please further tune the variable for optimal performance in "
    "your application as needed.";

using Merged = std::map<std::string, std::string, std::less<>>;

// Set only when the user set neither name: one the user set is theirs, and
// setting the other could contradict it. Only the name the workers' torch
// reads, when its version is known (2.2 and later warn at start on the old
// name, 1.13 to 2.1 read only the old one); both when it is not.
void defaultNcclAsyncErrorHandling(Merged& merged, const std::optional<TorchVersion>& torch) {
  if (merged.contains(proto::env::kNcclAsyncErrorHandling) ||
      merged.contains(proto::env::kLegacyNcclAsyncErrorHandling)) {
    return;
  }
  if (!torch || torch->atLeast(2, 2)) {
    merged.emplace(proto::env::kNcclAsyncErrorHandling, "1");
  }
  if (!torch || !torch->atLeast(2, 2)) {
    merged.emplace(proto::env::kLegacyNcclAsyncErrorHandling, "1");
  }
}

// The forensics a hang needs, armed where the user chose nothing: a Python
// worker stopped with SIGABRT then prints every thread's Python stack, and an
// NCCL one keeps its last collectives to dump on a timeout. Gloo and non-Python
// workers ignore them.
void defaultForensics(Merged& merged) {
  merged.emplace(proto::env::kPythonFaultHandler, "1");
  merged.emplace(proto::env::kNcclTraceBufferSize, "2000");
  merged.emplace(proto::env::kNcclDumpOnTimeout, "1");
}

std::string trimmed(const std::string& text) {
  const auto first = text.find_first_not_of(" \t");
  return first == std::string::npos ? ""
                                    : text.substr(first, text.find_last_not_of(" \t") - first + 1);
}

// --virtual-local-rank, as torchrun maps it: local rank i gets the i-th entry
// of the agent's CUDA_VISIBLE_DEVICES, or device i when it has none. Checked
// for every worker before any starts.
std::vector<std::string> ownDevices(const Merged& merged, int nproc) {
  std::vector<std::string> devices;
  const auto visible = merged.find(proto::env::kCudaVisibleDevices);
  if (visible == merged.end()) {
    for (int local_rank = 0; local_rank < nproc; ++local_rank) {
      devices.push_back(std::to_string(local_rank));
    }
    return devices;
  }
  std::istringstream list(visible->second);
  for (std::string entry; std::getline(list, entry, ',');) {
    devices.push_back(trimmed(entry));
  }
  if (static_cast<int>(devices.size()) < nproc) {
    throw ConfigError("--virtual-local-rank: local rank " + std::to_string(devices.size()) +
                      " has no device of its own: CUDA_VISIBLE_DEVICES='" + visible->second +
                      "' lists " + std::to_string(devices.size()) + " for " +
                      std::to_string(nproc) + " workers");
  }
  devices.resize(static_cast<std::size_t>(nproc));
  return devices;
}

// The inherited variables as a lookup; a later entry for a name wins.
Environment lookupIn(const WorkerEnvironment::Variables& inherited) {
  Merged merged;
  for (const auto& [name, value] : inherited) {
    merged.insert_or_assign(name, value);
  }
  return mapEnvironment(std::move(merged));
}

// `base` (sorted by name, as base_ is) with `own` laid over it, in one pass:
// copying base into a map for each worker was most of a worker's
// preparation before its start.
WorkerEnvironment::Variables overlay(
    const WorkerEnvironment::Variables& base,
    const std::map<std::string, std::optional<std::string>, std::less<>>& own) {
  WorkerEnvironment::Variables merged;
  merged.reserve(base.size() + own.size());
  auto next_own = own.begin();
  const auto takeOwnBefore = [&](const std::string* name) {
    for (; next_own != own.end() && (name == nullptr || next_own->first <= *name); ++next_own) {
      if (next_own->second) {
        merged.emplace_back(next_own->first, *next_own->second);
      }
    }
  };
  for (const auto& [name, value] : base) {
    const bool overridden = own.contains(name);
    takeOwnBefore(&name);
    if (!overridden) {
      merged.emplace_back(name, value);
    }
  }
  takeOwnBefore(nullptr);
  return merged;
}

}  // namespace

WorkerEnvironment::WorkerEnvironment(Job job, Variables inherited) : job_(std::move(job)) {
  Merged merged;
  // Members, not a structured binding: clang-tidy 14 misses a move from one,
  // and takes `inherited` for a copy that a const reference would spare.
  for (auto& variable : inherited) {
    merged[std::move(variable.first)] = std::move(variable.second);
  }
  if (job_.nproc_per_node > 1 && !merged.contains(proto::env::kOmpNumThreads)) {
    merged.emplace(proto::env::kOmpNumThreads, "1");
    notices_.emplace_back(kOmpWarning);
  }
  defaultNcclAsyncErrorHandling(merged, job_.workers_torch);
  defaultForensics(merged);
  if (!job_.socket_interface.empty()) {
    for (auto& [name, value] :
         socketInterfaceVariables(job_.socket_interface, mapEnvironment(merged))) {
      merged.insert_or_assign(std::move(name), std::move(value));
    }
  }
  if (job_.virtual_local_rank) {
    own_devices_ = ownDevices(merged, job_.nproc_per_node);
  }
  merged.insert_or_assign(std::string(proto::env::kSignalsToHandle), job_.signals_to_handle);
  if (!job_.timer_file.empty()) {
    merged.insert_or_assign(std::string(proto::env::kTimerFile), job_.timer_file);
  }
  base_has_nccl_dump_prefix_ = merged.contains(proto::env::kNcclDebugInfoTempFile);
  base_.assign(merged.begin(), merged.end());
}

WorkerEnvironment WorkerEnvironment::forLaunch(const LaunchConfig& config, int nproc,
                                               Variables inherited,
                                               std::optional<TorchVersion> workers_torch) {
  Job job;
  job.workers_torch = workers_torch;
  job.nproc_per_node = nproc;
  job.max_restarts = config.max_restarts;
  job.role = config.role;
  job.run_id = config.rdzv_id;
  job.signals_to_handle = config.signals_to_handle_text;
  job.timer_file = config.timer_file.value_or("");
  job.virtual_local_rank = config.virtual_local_rank;
  SocketInterfaceChoice socket =
      chooseSocketInterface(config, lookupIn(inherited), systemNetwork());
  job.socket_interface = socket.interface;
  WorkerEnvironment environment(std::move(job), std::move(inherited));
  if (!socket.info.empty()) {
    environment.infos_.push_back(std::move(socket.info));
  }
  if (!socket.warning.empty()) {
    environment.notices_.push_back(std::move(socket.warning));
  }
  return environment;
}

proto::WorkerEnv WorkerEnvironment::contract(const WorkerGroup& group, int local_rank,
                                             const std::string& error_file) const {
  proto::WorkerEnv worker;
  worker.rank = group.base_rank + local_rank;
  // --virtual-local-rank: each worker's one device is its device 0.
  worker.local_rank = job_.virtual_local_rank ? 0 : local_rank;
  worker.group_rank = group.group_rank;
  worker.role_rank = worker.rank;  // one role: ranks within it are global ranks
  worker.role_name = job_.role;
  worker.local_world_size = job_.nproc_per_node;
  worker.world_size = group.world_size;
  worker.group_world_size = group.group_world_size;
  worker.role_world_size = group.world_size;
  worker.master_addr = group.store_host;
  worker.master_port = group.store_port;
  worker.restart_count = group.attempt;
  worker.max_restarts = job_.max_restarts;
  worker.run_id = job_.run_id;
  worker.use_agent_store = true;  // the store is the agent's, never a worker's
  worker.error_file = error_file;
  return worker;
}

WorkerEnvironment::Variables WorkerEnvironment::forWorker(const WorkerGroup& group, int local_rank,
                                                          const std::string& error_file) const {
  // This worker's own variables, over the inherited ones: a value, or
  // nullopt for one it must not have.
  std::map<std::string, std::optional<std::string>, std::less<>> own;
  for (auto& [name, value] : proto::toEnvironment(contract(group, local_rank, error_file))) {
    own.insert_or_assign(std::move(name), std::move(value));
  }
  if (!own_devices_.empty()) {
    own.insert_or_assign(std::string(proto::env::kCudaVisibleDevices),
                         own_devices_.at(static_cast<std::size_t>(local_rank)));
  }
  // The Flight Recorder's dumps go to the worker's attempt directory, beside
  // its error file, unless the user chose a place.
  if (!error_file.empty() && !base_has_nccl_dump_prefix_) {
    own.insert_or_assign(std::string(proto::env::kNcclDebugInfoTempFile),
                         (std::filesystem::path(error_file).parent_path() /
                          std::string(proto::env::kNcclTraceDumpPrefix))
                             .string());
  }
  // Always ours: an inherited one (ddprun run from a worker of another
  // launch) names the outer worker's file.
  const auto fileIn = [&group, local_rank](const std::filesystem::path& dir,
                                           const auto& file_of) -> std::optional<std::string> {
    return dir.empty() ? std::nullopt
                       : std::optional(file_of(dir, group.attempt, local_rank).string());
  };
  own.insert_or_assign(std::string(proto::env::kTimelineEvents),
                       fileIn(job_.timeline_events_dir, timelineEventsFile));
  own.insert_or_assign(std::string(proto::env::kProgressEvents),
                       fileIn(job_.progress_events_dir, progressEventsFile));
  return overlay(base_, own);
}

std::filesystem::path progressEventsFile(const std::filesystem::path& dir, int attempt,
                                         int local_rank) {
  return dir / ("attempt_" + std::to_string(attempt) + ".local_rank_" + std::to_string(local_rank) +
                ".progress.jsonl");
}

std::filesystem::path timelineEventsFile(const std::filesystem::path& dir, int attempt,
                                         int local_rank) {
  return dir / ("attempt_" + std::to_string(attempt) + ".local_rank_" + std::to_string(local_rank) +
                ".jsonl");
}

}  // namespace ddprun::launcher

#include "ddprun/launcher/worker_environment.hpp"

#include <map>

#include "ddprun/launcher/rendezvous.hpp"

namespace ddprun::launcher {
namespace {

constexpr const char* kOmpWarning =
    "Setting OMP_NUM_THREADS environment variable for each process to be 1 in default, to avoid "
    "your system being overloaded, please further tune the variable for optimal performance in "
    "your application as needed.";

}  // namespace

WorkerEnvironment::WorkerEnvironment(Job job, Variables inherited) : job_(std::move(job)) {
  std::map<std::string, std::string, std::less<>> merged;
  for (auto& [name, value] : inherited) {
    merged[std::move(name)] = std::move(value);
  }
  if (job_.nproc_per_node > 1 && !merged.contains(proto::env::kOmpNumThreads)) {
    merged.emplace(proto::env::kOmpNumThreads, "1");
    notices_.emplace_back(kOmpWarning);
  }
  const auto nccl = merged.find(proto::env::kNcclAsyncErrorHandling);
  nccl_async_error_handling_ = nccl != merged.end() ? nccl->second : "1";
  merged.insert_or_assign(std::string(proto::env::kSignalsToHandle), job_.signals_to_handle);
  if (!job_.timer_file.empty()) {
    merged.insert_or_assign(std::string(proto::env::kTimerFile), job_.timer_file);
  }
  base_.assign(merged.begin(), merged.end());
}

WorkerEnvironment WorkerEnvironment::forLaunch(const LaunchConfig& config, int nproc,
                                               Variables inherited) {
  Job job;
  job.nproc_per_node = nproc;
  job.max_restarts = config.max_restarts;
  job.role = config.role;
  job.run_id = config.rdzv_id;
  job.signals_to_handle = config.signals_to_handle_text;
  job.timer_file = config.timer_file.value_or("");
  return WorkerEnvironment(std::move(job), std::move(inherited));
}

proto::WorkerEnv WorkerEnvironment::contract(const WorkerGroup& group, int local_rank,
                                             const std::string& error_file) const {
  proto::WorkerEnv worker;
  worker.rank = group.base_rank + local_rank;
  worker.local_rank = local_rank;
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
  worker.nccl_async_error_handling = nccl_async_error_handling_;
  return worker;
}

WorkerEnvironment::Variables WorkerEnvironment::forWorker(const WorkerGroup& group, int local_rank,
                                                          const std::string& error_file) const {
  std::map<std::string, std::string> merged(base_.begin(), base_.end());
  for (auto& [name, value] : proto::toEnvironment(contract(group, local_rank, error_file))) {
    merged[std::move(name)] = std::move(value);
  }
  return {merged.begin(), merged.end()};
}

}  // namespace ddprun::launcher

#include "ddprun/worker/process_group.hpp"

#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "ddprun/proto/errors.hpp"
#include "ddprun/worker/training_device.hpp"

namespace ddprun::worker {
namespace {

c10::intrusive_ptr<c10d::Store> connectStore(const proto::WorkerEnv& env,
                                             std::chrono::milliseconds timeout) {
  c10d::TCPStoreOptions options;
  options.port = env.master_port;
  // As torch.distributed's env:// does: with an agent store every rank is a
  // client; otherwise rank 0 hosts the store for the others.
  options.isServer = !env.use_agent_store && env.rank == 0;
  options.numWorkers = static_cast<std::size_t>(env.world_size);
  options.waitWorkers = true;
  options.timeout = timeout;
  options.multiTenant = true;
  c10::intrusive_ptr<c10d::Store> store =
      c10::make_intrusive<c10d::TCPStore>(env.master_addr, options);
  if (env.use_agent_store) {
    store = c10::make_intrusive<c10d::PrefixStore>(agentStorePrefix(env.restart_count), store);
  }
  return store;
}

}  // namespace

std::string agentStorePrefix(int restart_count) {
  return "/worker/attempt_" + std::to_string(restart_count);
}

// The group for `device`'s backend over `store`.
c10::intrusive_ptr<c10d::ProcessGroup> groupFor(const TrainingDevice& device,
                                                const c10::intrusive_ptr<c10d::Store>& store,
                                                int rank, int world_size,
                                                std::chrono::milliseconds timeout) {
  return device.backend == "nccl" ? cuda_support::ncclGroup(store, rank, world_size, timeout)
                                  : gloo_support::glooGroup(store, rank, world_size, timeout);
}

DistributedContext connectProcessGroup(const proto::WorkerEnv& env, const std::string& backend,
                                       std::chrono::milliseconds timeout) {
  const TrainingDevice device = chooseTrainingDevice(backend, env.local_rank);
  DistributedContext context{env, connectStore(env, timeout), {}, device.backend, device.device};
  context.group = groupFor(device, context.store, env.rank, env.world_size, timeout);
  return context;
}

DistributedContext singleProcessGroup(const std::string& backend,
                                      std::chrono::milliseconds timeout) {
  const TrainingDevice device = chooseTrainingDevice(backend, 0);
  DistributedContext context{proto::WorkerEnv{},
                             c10::make_intrusive<c10d::HashStore>(),
                             {},
                             device.backend,
                             device.device};
  context.group = groupFor(device, context.store, 0, 1, timeout);
  return context;
}

}  // namespace ddprun::worker

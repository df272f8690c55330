#include "ddprun/worker/process_group.hpp"

#include <cstdlib>
#include <sstream>
#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
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

// GLOO_SOCKET_IFNAME (comma-separated) picks the interfaces, as in PyTorch;
// otherwise Gloo's default device (the hostname's address, else loopback).
std::vector<std::shared_ptr<gloo::transport::Device>> glooDevices() {
  std::vector<std::shared_ptr<gloo::transport::Device>> devices;
  if (const char* names = std::getenv("GLOO_SOCKET_IFNAME"); names != nullptr && *names) {
    std::stringstream list(names);
    std::string name;
    while (std::getline(list, name, ',')) {
      devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(name));
    }
  } else {
    devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
  }
  return devices;
}

c10::intrusive_ptr<c10d::ProcessGroup> glooGroup(const c10::intrusive_ptr<c10d::Store>& store,
                                                 int rank, int world_size,
                                                 std::chrono::milliseconds timeout) {
  auto options = c10d::ProcessGroupGloo::Options::create(timeout);
  options->devices = glooDevices();
  return c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, world_size, options);
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
                                  : glooGroup(store, rank, world_size, timeout);
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
  DistributedContext context{proto::WorkerEnv{}, c10::make_intrusive<c10d::HashStore>(), {},
                             device.backend, device.device};
  context.group = groupFor(device, context.store, 0, 1, timeout);
  return context;
}

}  // namespace ddprun::worker

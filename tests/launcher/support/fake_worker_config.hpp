// The agent's tests' single node: its group and an AgentConfig that runs
// fake workers (DDPRUN_FAKE_WORKER) under a scripted rendezvous. Stateless.
#pragma once

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "ddprun/launcher/agent/agent.hpp"
#include "ddprun/launcher/config/worker_environment.hpp"

namespace ddprun::launcher::testing {

// One node's group, its store on a port nothing listens on.
inline WorkerGroup singleNode(int nproc) {
  WorkerGroup group;
  group.world_size = nproc;
  group.store_host = "127.0.0.1";
  group.store_port = 29999;
  return group;
}

// `nproc` fake workers run with `worker_args`, a 5 s grace. `job` is the
// rest of the workers' job (its nproc and max_restarts are filled in here),
// `inherited` the environment they inherit.
inline AgentConfig fakeWorkerConfig(Rendezvous& rendezvous, int nproc,
                                    std::vector<std::string> worker_args, int max_restarts,
                                    WorkerEnvironment::Job job,
                                    WorkerEnvironment::Variables inherited) {
  AgentConfig config;
  config.nproc_per_node = nproc;
  config.max_restarts = max_restarts;
  config.shutdown_timeout = std::chrono::seconds(5);
  config.rendezvous = &rendezvous;
  job.nproc_per_node = nproc;
  job.max_restarts = max_restarts;
  config.environment = WorkerEnvironment(std::move(job), std::move(inherited));
  config.command = [worker_args = std::move(worker_args)](int) {
    std::vector<std::string> argv = {DDPRUN_FAKE_WORKER};
    argv.insert(argv.end(), worker_args.begin(), worker_args.end());
    return argv;
  };
  return config;
}

}  // namespace ddprun::launcher::testing

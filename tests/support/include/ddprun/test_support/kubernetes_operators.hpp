// The variables Kubernetes' training operators write into a trainer pod's
// container, for the tests that start ddprun as such a pod's entrypoint:
//   - Kubeflow Trainer v2, TrainJob (pkg/runtime/framework/plugins/torch/torch.go):
//     PET_NNODES, PET_NPROC_PER_NODE ("auto" unless the job says), PET_NODE_RANK
//     (the JobSet's completion index), PET_MASTER_ADDR=<job>-node-0-0.<job>
//     (<job>-trainer-node-0-0.<job> in its first releases), PET_MASTER_PORT=29500.
//   - Kubeflow training-operator v1, PyTorchJob with a Master replica
//     (pkg/controller.v1/pytorch/envvar.go, master.go): PYTHONUNBUFFERED=0,
//     MASTER_ADDR=<job>-master-0, MASTER_PORT (the "pytorchjob-port", 23456 by
//     default), WORLD_SIZE, RANK; from v1.7 on also PET_MASTER_ADDR,
//     PET_MASTER_PORT, PET_NPROC_PER_NODE ("auto" by default), PET_NODE_RANK
//     and PET_NNODES.
//   - the same with an elasticPolicy (elastic.go): PET_RDZV_ENDPOINT
//     (<job>-worker-0:<port> unless rdzvHost/rdzvPort say), PET_RDZV_BACKEND
//     (c10d by default), PET_NNODES (min:max, or the replicas), PET_MAX_RESTARTS,
//     PET_NPROC_PER_NODE (PET_N_PROC_PER_NODE before v1.7), PET_RDZV_ID,
//     PET_RDZV_CONF and PET_STANDALONE="" when asked.
// Header-only; stateless.
#pragma once

#include <string>

#include "ddprun/test_support/command.hpp"

namespace ddprun::test_support::kubernetes {

// A TrainJob named `job`: node `node_rank` of `nodes`.
inline Environment trainJob(const std::string& job, int node_rank, int nodes,
                            const std::string& nproc = "auto", bool first_releases = false) {
  const std::string node = first_releases ? "-trainer-node" : "-node";
  return {{"PET_NNODES", std::to_string(nodes)},
          {"PET_NPROC_PER_NODE", nproc},
          {"PET_NODE_RANK", std::to_string(node_rank)},
          {"PET_MASTER_ADDR", job + node + "-0-0." + job},
          {"PET_MASTER_PORT", "29500"}};
}

// A PyTorchJob named `job` with one Master and `replicas - 1` Workers:
// replica `rank` (0 the master). `before_1_7`: the operator's variables then.
inline Environment pytorchJob(const std::string& job, int rank, int replicas,
                              const std::string& nproc = "auto", bool before_1_7 = false) {
  const std::string master = job + "-master-0";
  const int per_node = nproc == "auto" ? 1 : std::stoi(nproc);
  Environment env = {{"PYTHONUNBUFFERED", "0"},
                     {"MASTER_PORT", "23456"},
                     {"MASTER_ADDR", master},
                     {"WORLD_SIZE", std::to_string(before_1_7 ? replicas : replicas * per_node)},
                     {"RANK", std::to_string(rank)}};
  if (!before_1_7) {
    env.insert(env.end(), {{"PET_MASTER_PORT", "23456"},
                           {"PET_MASTER_ADDR", master},
                           {"PET_NPROC_PER_NODE", nproc},
                           {"PET_NODE_RANK", std::to_string(rank)},
                           {"PET_NNODES", std::to_string(replicas)}});
  }
  return env;
}

// A PyTorchJob named `job` with an elasticPolicy and Workers only: `nnodes`
// as the operator writes it ("1:3", or the replicas); `endpoint`: rdzvHost:
// rdzvPort, "" for the operator's default (worker 0's service).
inline Environment elasticPyTorchJob(const std::string& job, const std::string& nnodes, int nproc,
                                     bool before_1_7 = false, bool standalone = false,
                                     const std::string& endpoint = "") {
  Environment env = {
      {"PYTHONUNBUFFERED", "0"},
      {"PET_RDZV_ENDPOINT", endpoint.empty() ? job + "-worker-0:23456" : endpoint},
      {"PET_RDZV_BACKEND", "c10d"},
      {"PET_NNODES", nnodes},
      {"PET_MAX_RESTARTS", "3"},
      {before_1_7 ? "PET_N_PROC_PER_NODE" : "PET_NPROC_PER_NODE", std::to_string(nproc)},
      {"PET_RDZV_ID", job}};
  if (standalone) {
    env.emplace_back("PET_STANDALONE", "");
  }
  return env;
}

}  // namespace ddprun::test_support::kubernetes

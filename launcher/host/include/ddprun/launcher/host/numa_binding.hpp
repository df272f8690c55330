// --numa-binding: the CPUs each local rank's worker is bound to
// (docs/torchrun-contract.md §4.1), by torchrun 2.x's rules. Local rank i
// uses device i, and a device's NUMA node decides:
//   node          every CPU of that node;
//   socket        every CPU of the nodes in that node's package;
//   exclusive     a slice of the node's physical cores (a core's hyperthreads
//                 stay together), cut evenly among the devices on the node,
//                 the lowest ones taking one core more when it does not divide;
//   core-complex  the CPUs of one of the node's outermost data caches (an L3:
//                 a core complex), the fullest first, one per device on the
//                 node; more devices than complexes wrap round and share.
// The devices are the visible CUDA GPUs; with none, ddprun's own rule: the
// local ranks are the devices, spread over the NUMA nodes in contiguous blocks.
// Pure functions over a CpuTopology, and the one that reads this machine.
// Stateless; any thread.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "ddprun/launcher/core/launch_config.hpp"
#include "ddprun/launcher/host/cpu_topology.hpp"

namespace ddprun::launcher {

// Each local rank's CPUs, for local ranks 0..nproc-1. `device_nodes[i]` is
// the NUMA node of device i, for every device of this machine (CPUs are
// divided among all the devices on a node, as torchrun divides them among all
// its GPUs, whether or not each has a rank); nproc <= device_nodes.size().
// Throws ConfigError, naming the mode and why, when it cannot be honoured
// (a node without CPUs, fewer cores than devices, no cache information).
std::vector<CpuList> bindLocalRanks(NumaBinding mode, const CpuTopology& topology,
                                    const std::vector<int>& device_nodes, int nproc);

// Without GPUs: the NUMA node of each of `nproc` local ranks, rank i on the
// (i * N / nproc)-th of the N nodes that have CPUs.
std::vector<int> spreadOverNodes(const CpuTopology& topology, int nproc);

// "0-2,4,6-7", as Linux lists CPUs.
std::string formatCpuList(const CpuList& cpus);

// The one line that says the binding: the mode, what placed the ranks, and
// each local rank's CPUs and node, consecutive ranks that share both merged
// ("local ranks 0-3: CPUs 0-15 (node 0)").
std::string describeBinding(NumaBinding mode, std::string_view placed_by,
                            const std::vector<int>& rank_nodes,
                            const std::vector<CpuList>& rank_cpus);

struct CpuBinding {
  std::vector<CpuList> cpus;  // per local rank
  std::string description;    // describeBinding's line
};

// This machine's binding for `nproc` local ranks: hwloc's topology, and the
// GPUs' NUMA nodes, or the spread when no GPU is visible. Throws ConfigError
// when the mode cannot be honoured, before any worker exists.
CpuBinding bindOnThisMachine(NumaBinding mode, int nproc);

}  // namespace ddprun::launcher

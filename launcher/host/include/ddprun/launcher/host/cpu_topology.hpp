// What --numa-binding needs to know of a machine: for each CPU it may use,
// its NUMA node, its package (socket), its physical core and its outermost
// data cache (the L3 of a core complex, on most machines).
//
// Read with hwloc (Debian's libhwloc), not from /sys by hand: hwloc already
// knows Linux's topology files, cgroup cpusets and the odd machine, and it
// builds SYNTHETIC topologies ("package:2 numa:2 l3:2 core:4 pu:2"), so the
// binding rules are tested on multi-socket, multi-node, multi-L3 machines
// that no test host has. A value type: built once, read from any thread.
#pragma once

#include <string>
#include <vector>

namespace ddprun::launcher {

// Logical CPU numbers (as in /proc/self/status' Cpus_allowed_list), sorted.
using CpuList = std::vector<int>;

struct CpuTopology {
  struct Cpu {
    int id = 0;       // the logical CPU number
    int node = 0;     // its NUMA node (Linux's node number)
    int package = 0;  // its socket
    int core = 0;     // its physical core, named by the core's first CPU
    int cache = -1;   // its outermost data cache, named by that cache's first CPU; -1: unknown
  };
  std::vector<Cpu> cpus;  // by id; only the CPUs the reading process may use

  // The CPUs of NUMA node `node`, sorted; empty for a node without CPUs.
  CpuList cpusOfNode(int node) const;
  // The NUMA nodes that have CPUs, sorted.
  std::vector<int> nodes() const;
};

// This machine, as this process sees it: only the CPUs of its affinity mask
// (sched_getaffinity), as torchrun keeps only those. Throws ddprun::Error when
// hwloc cannot read the machine.
CpuTopology machineTopology();

// The machine hwloc synthesizes from `description` (hwloc's synthetic
// syntax), keeping only the CPUs in `allowed` (all when empty). Throws
// ConfigError for a description hwloc refuses.
CpuTopology syntheticTopology(const std::string& description, const CpuList& allowed = {});

}  // namespace ddprun::launcher

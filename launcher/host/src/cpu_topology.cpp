#include "ddprun/launcher/host/cpu_topology.hpp"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <memory>
#include <set>

#include "ddprun/proto/errors.hpp"
#include "hwloc_library.hpp"

namespace ddprun::launcher {
namespace {

using detail::hwloc;

// One hwloc topology, destroyed with its owner.
struct TopologyDeleter {
  void operator()(hwloc_topology* topology) const { hwloc().topology_destroy(topology); }
};
using Topology = std::unique_ptr<hwloc_topology, TopologyDeleter>;

Topology newTopology() {
  hwloc_topology_t topology = nullptr;
  if (hwloc().topology_init(&topology) != 0) {
    throw Error("cannot read the machine's CPU topology: hwloc_topology_init failed");
  }
  return Topology(topology);
}

void load(hwloc_topology_t topology) {
  if (hwloc().topology_load(topology) != 0) {
    throw Error("cannot read the machine's CPU topology: hwloc_topology_load failed");
  }
}

// The objects of `type`, one after the other: hwloc_get_next_obj_by_type,
// which is inline in hwloc's header, made of the library's functions.
hwloc_obj_t nextOfType(hwloc_topology_t topology, hwloc_obj_type_t type, hwloc_obj_t previous) {
  const int depth = hwloc().get_type_depth(topology, type);
  if (depth == HWLOC_TYPE_DEPTH_UNKNOWN || depth == HWLOC_TYPE_DEPTH_MULTIPLE) {
    return nullptr;
  }
  if (previous == nullptr) {
    return hwloc().get_obj_by_depth(topology, depth, 0);
  }
  return previous->depth == depth ? previous->next_cousin : nullptr;
}

// The nearest object of `type` above `object` (hwloc_get_ancestor_obj_by_type).
const hwloc_obj* ancestorOfType(hwloc_obj_type_t type, const hwloc_obj* object) {
  const hwloc_obj* ancestor = object->parent;
  while (ancestor != nullptr && ancestor->type != type) {
    ancestor = ancestor->parent;
  }
  return ancestor;
}

// The lowest-numbered NUMA node whose CPUs include `pu`. hwloc gives a
// memory-only node (HBM, CXL) the CPUs near it, which Linux lists under the
// DRAM node only; that node has the lower number.
int nodeOf(hwloc_topology_t topology, unsigned pu) {
  int node = -1;
  for (hwloc_obj_t numa = nextOfType(topology, HWLOC_OBJ_NUMANODE, nullptr); numa != nullptr;
       numa = nextOfType(topology, HWLOC_OBJ_NUMANODE, numa)) {
    const int id = static_cast<int>(numa->os_index);
    if (hwloc().bitmap_isset(numa->cpuset, pu) && (node < 0 || id < node)) {
      node = id;
    }
  }
  return std::max(node, 0);
}

int firstCpuOf(const hwloc_obj* object) { return hwloc().bitmap_first(object->cpuset); }

CpuTopology::Cpu describe(hwloc_topology_t topology, hwloc_obj_t pu) {
  CpuTopology::Cpu cpu;
  cpu.id = static_cast<int>(pu->os_index);
  cpu.node = nodeOf(topology, pu->os_index);
  const hwloc_obj* package = ancestorOfType(HWLOC_OBJ_PACKAGE, pu);
  cpu.package = package != nullptr ? static_cast<int>(package->logical_index) : 0;
  const hwloc_obj* core = ancestorOfType(HWLOC_OBJ_CORE, pu);
  cpu.core = core != nullptr ? firstCpuOf(core) : cpu.id;  // no core object: its own core
  // The outermost data (or unified) cache above it, as torchrun takes the
  // highest-level one from sysfs.
  for (hwloc_obj_t parent = pu->parent; parent != nullptr; parent = parent->parent) {
    if (hwloc().obj_type_is_dcache(parent->type) != 0) {
      cpu.cache = firstCpuOf(parent);
    }
  }
  return cpu;
}

CpuTopology read(hwloc_topology_t topology, const std::set<int>& allowed) {
  CpuTopology result;
  for (hwloc_obj_t pu = nextOfType(topology, HWLOC_OBJ_PU, nullptr); pu != nullptr;
       pu = nextOfType(topology, HWLOC_OBJ_PU, pu)) {
    if (allowed.empty() || allowed.contains(static_cast<int>(pu->os_index))) {
      result.cpus.push_back(describe(topology, pu));
    }
  }
  std::sort(result.cpus.begin(), result.cpus.end(),
            [](const auto& a, const auto& b) { return a.id < b.id; });
  return result;
}

std::set<int> ownAffinity() {
  const int possible = std::max(CPU_SETSIZE, static_cast<int>(sysconf(_SC_NPROCESSORS_CONF)));
  cpu_set_t* mask = CPU_ALLOC(possible);
  const std::size_t size = CPU_ALLOC_SIZE(possible);
  std::set<int> cpus;
  if (mask != nullptr && sched_getaffinity(0, size, mask) == 0) {
    for (int cpu = 0; cpu < possible; ++cpu) {
      if (CPU_ISSET_S(cpu, size, mask)) {
        cpus.insert(cpu);
      }
    }
  }
  CPU_FREE(mask);
  if (cpus.empty()) {
    throw Error("cannot read the CPUs this process may use: sched_getaffinity failed");
  }
  return cpus;
}

}  // namespace

CpuList CpuTopology::cpusOfNode(int node) const {
  CpuList list;
  for (const Cpu& cpu : cpus) {
    if (cpu.node == node) {
      list.push_back(cpu.id);
    }
  }
  return list;
}

std::vector<int> CpuTopology::nodes() const {
  std::set<int> ids;
  for (const Cpu& cpu : cpus) {
    ids.insert(cpu.node);
  }
  return {ids.begin(), ids.end()};
}

CpuTopology machineTopology() {
  const Topology topology = newTopology();
  load(topology.get());
  return read(topology.get(), ownAffinity());
}

CpuTopology syntheticTopology(const std::string& description, const CpuList& allowed) {
  const Topology topology = newTopology();
  if (hwloc().topology_set_synthetic(topology.get(), description.c_str()) != 0) {
    throw ConfigError("hwloc refuses the synthetic topology '" + description + "'");
  }
  load(topology.get());
  return read(topology.get(), {allowed.begin(), allowed.end()});
}

}  // namespace ddprun::launcher

#include "ddprun/launcher/host/numa_binding.hpp"

#include <algorithm>
#include <iterator>
#include <map>
#include <utility>

#include "ddprun/launcher/core/option_values.hpp"
#include "ddprun/launcher/host/gpu_locality.hpp"
#include "ddprun/proto/errors.hpp"

namespace ddprun::launcher {
namespace {

[[noreturn]] void refuse(NumaBinding mode, const std::string& why) {
  throw ConfigError("--numa-binding " + std::string(numaBindingName(mode)) + ": " + why);
}

// Device `device`'s place among the devices on its NUMA node, and how many
// there are.
struct Share {
  int index = 0;
  int count = 0;
};

Share shareOf(const std::vector<int>& device_nodes, int device) {
  Share share;
  for (std::size_t other = 0; other < device_nodes.size(); ++other) {
    if (device_nodes[other] == device_nodes[static_cast<std::size_t>(device)]) {
      share.index += static_cast<int>(other) < device ? 1 : 0;
      ++share.count;
    }
  }
  return share;
}

std::vector<CpuTopology::Cpu> cpusOn(NumaBinding mode, const CpuTopology& topology, int node) {
  std::vector<CpuTopology::Cpu> cpus;
  std::copy_if(topology.cpus.begin(), topology.cpus.end(), std::back_inserter(cpus),
               [node](const auto& cpu) { return cpu.node == node; });
  if (cpus.empty()) {
    refuse(mode, "NUMA node " + std::to_string(node) + " has no CPU that ddprun may use");
  }
  return cpus;
}

// Every CPU of the nodes whose first CPU is in the package of `node`'s first.
CpuList socketCpus(const CpuTopology& topology, int node) {
  std::map<int, int> package_of_node;  // by each node's first CPU
  for (const auto& cpu : topology.cpus) {
    package_of_node.try_emplace(cpu.node, cpu.package);
  }
  CpuList cpus;
  for (const auto& cpu : topology.cpus) {
    if (package_of_node[cpu.node] == package_of_node[node]) {
      cpus.push_back(cpu.id);
    }
  }
  return cpus;
}

CpuList exclusiveCpus(const std::vector<CpuTopology::Cpu>& node_cpus, Share share, int node) {
  std::map<int, CpuList> cores;  // by each core's first CPU, as torchrun orders them
  for (const auto& cpu : node_cpus) {
    cores[cpu.core].push_back(cpu.id);
  }
  const int per_device = static_cast<int>(cores.size()) / share.count;
  const int with_one_more = static_cast<int>(cores.size()) % share.count;
  if (per_device < 1) {
    refuse(NumaBinding::kExclusive,
           "NUMA node " + std::to_string(node) + " has " + std::to_string(cores.size()) +
               " physical core(s) that ddprun may use for " + std::to_string(share.count) +
               " local ranks; each needs one of its own (use fewer ranks, or node)");
  }
  const int start = share.index * per_device + std::min(share.index, with_one_more);
  const int end = start + per_device + (share.index < with_one_more ? 1 : 0);
  CpuList cpus;
  auto core = std::next(cores.begin(), start);
  for (int taken = start; taken < end; ++taken, ++core) {
    cpus.insert(cpus.end(), core->second.begin(), core->second.end());
  }
  std::sort(cpus.begin(), cpus.end());
  return cpus;
}

CpuList coreComplexCpus(const std::vector<CpuTopology::Cpu>& node_cpus, Share share, int node) {
  std::map<int, CpuList> caches;  // by each cache's first CPU
  for (const auto& cpu : node_cpus) {
    if (cpu.cache < 0) {
      refuse(NumaBinding::kCoreComplex,
             "the topology names no cache that CPU " + std::to_string(cpu.id) + " of NUMA node " +
                 std::to_string(node) + " shares (no L3 information); use node or exclusive");
    }
    caches[cpu.cache].push_back(cpu.id);
  }
  std::vector<std::pair<int, CpuList>> complexes(caches.begin(), caches.end());
  // The fullest first, then by first CPU, as torchrun orders them.
  std::stable_sort(complexes.begin(), complexes.end(),
                   [](const auto& a, const auto& b) { return a.second.size() > b.second.size(); });
  return complexes[static_cast<std::size_t>(share.index) % complexes.size()].second;
}

CpuList cpusOfDevice(NumaBinding mode, const CpuTopology& topology,
                     const std::vector<int>& device_nodes, int device) {
  const int node = device_nodes[static_cast<std::size_t>(device)];
  // Refused in every mode when the node has no CPU this process may use.
  const std::vector<CpuTopology::Cpu> node_cpus = cpusOn(mode, topology, node);
  switch (mode) {
    case NumaBinding::kNode:
      return topology.cpusOfNode(node);
    case NumaBinding::kSocket:
      return socketCpus(topology, node);
    case NumaBinding::kExclusive:
      return exclusiveCpus(node_cpus, shareOf(device_nodes, device), node);
    case NumaBinding::kCoreComplex:
      return coreComplexCpus(node_cpus, shareOf(device_nodes, device), node);
  }
  refuse(mode, "unknown mode");
}

std::string rankRange(int first, int last) {
  return first == last ? "local rank " + std::to_string(first)
                       : "local ranks " + std::to_string(first) + "-" + std::to_string(last);
}

}  // namespace

std::vector<CpuList> bindLocalRanks(NumaBinding mode, const CpuTopology& topology,
                                    const std::vector<int>& device_nodes, int nproc) {
  std::vector<CpuList> cpus;
  cpus.reserve(static_cast<std::size_t>(std::max(nproc, 0)));
  for (int local_rank = 0; local_rank < nproc; ++local_rank) {
    cpus.push_back(cpusOfDevice(mode, topology, device_nodes, local_rank));
  }
  return cpus;
}

std::vector<int> spreadOverNodes(const CpuTopology& topology, int nproc) {
  const std::vector<int> nodes = topology.nodes();
  std::vector<int> rank_nodes;
  for (long long rank = 0; rank < nproc; ++rank) {
    rank_nodes.push_back(
        nodes[static_cast<std::size_t>(rank * static_cast<long long>(nodes.size()) / nproc)]);
  }
  return rank_nodes;
}

std::string formatCpuList(const CpuList& cpus) {
  std::string text;
  for (std::size_t first = 0; first < cpus.size();) {
    std::size_t last = first;
    while (last + 1 < cpus.size() && cpus[last + 1] == cpus[last] + 1) {
      ++last;
    }
    text += (text.empty() ? "" : ",") + std::to_string(cpus[first]);
    if (last > first) {
      text += "-" + std::to_string(cpus[last]);
    }
    first = last + 1;
  }
  return text;
}

std::string describeBinding(NumaBinding mode, std::string_view placed_by,
                            const std::vector<int>& rank_nodes,
                            const std::vector<CpuList>& rank_cpus) {
  std::string line =
      "--numa-binding " + std::string(numaBindingName(mode)) + ", " + std::string(placed_by) + ":";
  const int ranks = static_cast<int>(rank_cpus.size());
  for (int first = 0; first < ranks;) {
    int last = first;
    while (last + 1 < ranks && rank_cpus[last + 1] == rank_cpus[first] &&
           rank_nodes[last + 1] == rank_nodes[first]) {
      ++last;
    }
    line += (first == 0 ? " " : "; ") + rankRange(first, last) + ": CPUs " +
            formatCpuList(rank_cpus[first]) + " (node " + std::to_string(rank_nodes[first]) + ")";
    first = last + 1;
  }
  return line;
}

CpuBinding bindOnThisMachine(NumaBinding mode, int nproc) {
  const CpuTopology topology = machineTopology();
  const std::vector<std::string> gpus = visibleGpuBusIds();
  std::vector<int> device_nodes;
  std::string placed_by;
  if (gpus.empty()) {
    device_nodes = spreadOverNodes(topology, nproc);
    placed_by = "no GPU visible, so the local ranks are spread over the NUMA nodes";
  } else if (static_cast<int>(gpus.size()) < nproc) {
    refuse(mode, "local rank " + std::to_string(gpus.size()) + " has no GPU of its own (" +
                     std::to_string(gpus.size()) +
                     " visible); each local rank is bound near the GPU of its index");
  } else {
    for (const std::string& bus_id : gpus) {
      device_nodes.push_back(numaNodeOfPciDevice(bus_id));
    }
    placed_by = "by the NUMA node of each local rank's GPU";
  }
  CpuBinding binding;
  binding.cpus = bindLocalRanks(mode, topology, device_nodes, nproc);
  binding.description = describeBinding(
      mode, placed_by, {device_nodes.begin(), device_nodes.begin() + nproc}, binding.cpus);
  return binding;
}

}  // namespace ddprun::launcher

// --numa-binding's CPU sets on machines hwloc synthesizes (several packages,
// NUMA nodes and L3 caches, hyperthreads numbered apart as on Intel), this
// machine's own topology, and a GPU's NUMA node from a fake sysfs tree.
#include "ddprun/launcher/host/numa_binding.hpp"

#include <gtest/gtest.h>
#include <sched.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "ddprun/launcher/host/cpu_topology.hpp"
#include "ddprun/launcher/host/gpu_locality.hpp"
#include "ddprun/proto/errors.hpp"
#include "ddprun/test_support/temp_dir.hpp"

namespace ddprun::launcher {
namespace {

using Mode = NumaBinding;

// 2 packages x 2 NUMA nodes x 2 L3 x 2 cores x 2 hyperthreads: 32 CPUs,
// node n holds CPUs 8n..8n+7, each L3 4 CPUs, each core 2.
const char* const kTwoSockets = "package:2 numa:2 l3:2 core:2 pu:2";

CpuList range(int first, int last) {
  CpuList cpus;
  for (int cpu = first; cpu <= last; ++cpu) {
    cpus.push_back(cpu);
  }
  return cpus;
}

// The message of the ConfigError `bind` throws; empty if it throws none.
template <typename F>
std::string refusal(F bind) {
  try {
    bind();
  } catch (const ConfigError& error) {
    return error.what();
  }
  return "";
}

TEST(CpuTopologyTest, SyntheticMachineGivesEachCpuItsNodePackageCoreAndCache) {
  const CpuTopology topology = syntheticTopology(kTwoSockets);
  ASSERT_EQ(topology.cpus.size(), 32u);
  EXPECT_EQ(topology.nodes(), (std::vector<int>{0, 1, 2, 3}));
  const CpuTopology::Cpu cpu = topology.cpus[11];
  EXPECT_EQ(cpu.id, 11);
  EXPECT_EQ(cpu.node, 1);
  EXPECT_EQ(cpu.package, 0);
  EXPECT_EQ(cpu.core, 10);
  EXPECT_EQ(cpu.cache, 8);
  EXPECT_EQ(topology.cpus[17].package, 1);
  EXPECT_EQ(topology.cpusOfNode(2), range(16, 23));
}

TEST(CpuTopologyTest, HyperthreadsNumberedApartShareTheirCore) {
  // Intel's numbering: core c has CPUs c and c+4.
  const CpuTopology topology = syntheticTopology("core:4 pu:2(indexes=0,4,1,5,2,6,3,7)");
  EXPECT_EQ(topology.cpus[4].core, 0);
  EXPECT_EQ(topology.cpus[7].core, 3);
  EXPECT_EQ(topology.cpus[0].cache, -1);  // no cache in the description
}

TEST(CpuTopologyTest, OnlyTheAllowedCpusAreKept) {
  const CpuTopology topology = syntheticTopology(kTwoSockets, {3, 9, 30});
  ASSERT_EQ(topology.cpus.size(), 3u);
  EXPECT_EQ(topology.nodes(), (std::vector<int>{0, 1, 3}));
}

TEST(CpuTopologyTest, BadDescriptionIsAConfigError) {
  EXPECT_THROW(syntheticTopology("package:two"), ConfigError);
}

TEST(CpuTopologyTest, ThisMachineHasExactlyTheCpusThisProcessMayUse) {
  cpu_set_t own;
  ASSERT_EQ(sched_getaffinity(0, sizeof(own), &own), 0);
  CpuList expected;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &own)) {
      expected.push_back(cpu);
    }
  }
  CpuList read;
  for (const auto& cpu : machineTopology().cpus) {
    read.push_back(cpu.id);
  }
  EXPECT_EQ(read, expected);
}

TEST(NumaBindingTest, NodeGivesEachRankEveryCpuOfItsNode) {
  const CpuTopology topology = syntheticTopology(kTwoSockets);
  EXPECT_EQ(bindLocalRanks(Mode::kNode, topology, spreadOverNodes(topology, 4), 4),
            (std::vector<CpuList>{range(0, 7), range(8, 15), range(16, 23), range(24, 31)}));
  const auto eight = bindLocalRanks(Mode::kNode, topology, spreadOverNodes(topology, 8), 8);
  EXPECT_EQ(eight[1], range(0, 7));
  EXPECT_EQ(eight[6], range(24, 31));
}

TEST(NumaBindingTest, SocketGivesEachRankEveryCpuOfItsNodesPackage) {
  const CpuTopology topology = syntheticTopology(kTwoSockets);
  EXPECT_EQ(bindLocalRanks(Mode::kSocket, topology, {0, 1, 2, 3}, 4),
            (std::vector<CpuList>{range(0, 15), range(0, 15), range(16, 31), range(16, 31)}));
}

TEST(NumaBindingTest, ExclusiveKeepsHyperthreadsTogether) {
  const CpuTopology topology = syntheticTopology("core:4 pu:2(indexes=0,4,1,5,2,6,3,7)");
  EXPECT_EQ(bindLocalRanks(Mode::kExclusive, topology, {0, 0}, 2),
            (std::vector<CpuList>{{0, 1, 4, 5}, {2, 3, 6, 7}}));
}

TEST(NumaBindingTest, ExclusiveGivesTheLowestRanksTheCoresLeftOver) {
  const CpuTopology topology = syntheticTopology("core:5 pu:1");
  EXPECT_EQ(bindLocalRanks(Mode::kExclusive, topology, {0, 0, 0}, 3),
            (std::vector<CpuList>{{0, 1}, {2, 3}, {4}}));
}

TEST(NumaBindingTest, ExclusiveSlicesEachNodeAmongTheRanksOnIt) {
  const CpuTopology topology = syntheticTopology(kTwoSockets);
  const auto cpus = bindLocalRanks(Mode::kExclusive, topology, spreadOverNodes(topology, 8), 8);
  EXPECT_EQ(cpus[0], range(0, 3));
  EXPECT_EQ(cpus[1], range(4, 7));
  EXPECT_EQ(cpus[7], range(28, 31));
}

TEST(NumaBindingTest, ExclusiveWithMoreRanksThanCoresIsRefused) {
  const CpuTopology topology = syntheticTopology("core:2 pu:2");
  EXPECT_EQ(refusal([&] {
              bindLocalRanks(Mode::kExclusive, topology, {0, 0, 0}, 3);
            }),
            "--numa-binding exclusive: NUMA node 0 has 2 physical core(s) that ddprun may use "
            "for 3 local ranks; each needs one of its own (use fewer ranks, or node)");
}

TEST(NumaBindingTest, CoreComplexGivesEachRankAnL3OfItsNode) {
  const CpuTopology topology = syntheticTopology(kTwoSockets);
  const auto cpus = bindLocalRanks(Mode::kCoreComplex, topology, {0, 0, 3, 3}, 4);
  EXPECT_EQ(cpus, (std::vector<CpuList>{range(0, 3), range(4, 7), range(24, 27), range(28, 31)}));
}

TEST(NumaBindingTest, CoreComplexWrapsRoundWhenRanksOutnumberComplexes) {
  const CpuTopology topology = syntheticTopology("numa:1 l3:3 core:2 pu:1");
  EXPECT_EQ(bindLocalRanks(Mode::kCoreComplex, topology, {0, 0, 0, 0, 0}, 5),
            (std::vector<CpuList>{{0, 1}, {2, 3}, {4, 5}, {0, 1}, {2, 3}}));
}

TEST(NumaBindingTest, CoreComplexTakesTheFullestFirst) {
  // CPU 1 is not ours: the first L3 has one CPU left, so it comes last.
  const CpuTopology topology = syntheticTopology("numa:1 l3:3 core:2 pu:1", {0, 2, 3, 4, 5});
  EXPECT_EQ(bindLocalRanks(Mode::kCoreComplex, topology, {0, 0, 0}, 3),
            (std::vector<CpuList>{{2, 3}, {4, 5}, {0}}));
}

TEST(NumaBindingTest, CoreComplexWithoutCacheInformationIsRefused) {
  const CpuTopology topology = syntheticTopology("numa:2 core:2 pu:1");
  EXPECT_EQ(refusal([&] {
              bindLocalRanks(Mode::kCoreComplex, topology, {0, 1}, 2);
            }),
            "--numa-binding core-complex: the topology names no cache that CPU 0 of NUMA node 0 "
            "shares (no L3 information); use node or exclusive");
}

TEST(NumaBindingTest, GpusPlaceTheRanksAndEveryGpuOnANodeTakesItsShare) {
  const CpuTopology topology = syntheticTopology(kTwoSockets);
  // GPUs 0 and 1 on node 1, GPUs 2 and 3 on node 0.
  EXPECT_EQ(bindLocalRanks(Mode::kExclusive, topology, {1, 1, 0, 0}, 4),
            (std::vector<CpuList>{range(8, 11), range(12, 15), range(0, 3), range(4, 7)}));
  // Four GPUs on node 0, two ranks: each rank still gets a GPU's quarter.
  EXPECT_EQ(bindLocalRanks(Mode::kExclusive, topology, {0, 0, 0, 0}, 2),
            (std::vector<CpuList>{{0, 1}, {2, 3}}));
}

TEST(NumaBindingTest, ANodeWithoutUsableCpusIsRefused) {
  const CpuTopology topology = syntheticTopology(kTwoSockets, range(0, 7));
  EXPECT_EQ(refusal([&] { bindLocalRanks(Mode::kNode, topology, {2}, 1); }),
            "--numa-binding node: NUMA node 2 has no CPU that ddprun may use");
}

TEST(NumaBindingTest, WithoutGpusRanksAreSpreadInContiguousBlocks) {
  const CpuTopology topology = syntheticTopology(kTwoSockets);
  EXPECT_EQ(spreadOverNodes(topology, 2), (std::vector<int>{0, 2}));
  EXPECT_EQ(spreadOverNodes(topology, 6), (std::vector<int>{0, 0, 1, 2, 2, 3}));
  EXPECT_EQ(spreadOverNodes(syntheticTopology("core:2 pu:1"), 3), (std::vector<int>{0, 0, 0}));
}

TEST(NumaBindingTest, CpuListsAreWrittenAsLinuxWritesThem) {
  EXPECT_EQ(formatCpuList({0, 1, 2, 4, 6, 7}), "0-2,4,6-7");
  EXPECT_EQ(formatCpuList({5}), "5");
  EXPECT_EQ(formatCpuList({}), "");
}

TEST(NumaBindingTest, TheDescriptionMergesConsecutiveRanksThatShareCpus) {
  EXPECT_EQ(describeBinding(Mode::kNode, "by GPU", {0, 0, 1}, {{0, 1}, {0, 1}, {2, 3}}),
            "--numa-binding node, by GPU: local ranks 0-1: CPUs 0-1 (node 0); local rank 2: "
            "CPUs 2-3 (node 1)");
}

TEST(GpuLocalityTest, AGpusNodeComesFromSysfsUnderItsLowerCaseAddress) {
  test_support::TempDir sysfs;
  const auto device = [&](const std::string& name, const std::string& node) {
    std::filesystem::create_directories(sysfs / name);
    std::ofstream(sysfs / name / "numa_node") << node << "\n";
  };
  device("0000:3b:00.0", "1");
  device("0001:c1:00.0", "-1");
  EXPECT_EQ(numaNodeOfPciDevice("0000:3B:00.0", sysfs.path()), 1);
  EXPECT_EQ(numaNodeOfPciDevice("00000000:3B:00.0", sysfs.path()), 1);
  EXPECT_EQ(numaNodeOfPciDevice("0001:C1:00.0", sysfs.path()), 0);  // -1: no NUMA information
  EXPECT_THROW(numaNodeOfPciDevice("0000:99:00.0", sysfs.path()), ConfigError);
  EXPECT_THROW(numaNodeOfPciDevice("GPU-1234", sysfs.path()), ConfigError);
}

}  // namespace
}  // namespace ddprun::launcher

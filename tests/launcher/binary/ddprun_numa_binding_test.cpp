// --numa-binding end to end on this machine (one NUMA node is still a
// topology, and there is no GPU): each worker, an executable or a Python
// script, reads the CPUs it may run on from /proc/self/status. Without the
// flag, the workers may use every CPU ddprun may.
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <utility>

#include "ddprun/test_support/files.hpp"
#include "ddprun_binary_fixture.hpp"

namespace ddprun::launcher {
namespace {

using testing::DdprunBinaryTest;
using testing::Outcome;
namespace fs = std::filesystem;

// "0-2,5" as a set.
std::set<int> parseCpuList(const std::string& text) {
  std::set<int> cpus;
  std::stringstream items(text);
  for (std::string item; std::getline(items, item, ',');) {
    const auto dash = item.find('-');
    const int first = std::stoi(item.substr(0, dash));
    const int last = dash == std::string::npos ? first : std::stoi(item.substr(dash + 1));
    for (int cpu = first; cpu <= last; ++cpu) {
      cpus.insert(cpu);
    }
  }
  return cpus;
}

std::set<int> ownCpus() {
  cpu_set_t own;
  sched_getaffinity(0, sizeof(own), &own);
  std::set<int> cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &own)) {
      cpus.insert(cpu);
    }
  }
  return cpus;
}

// The CPUs of each NUMA node that has any, as Linux lists them, less those
// this process may not use.
std::vector<std::set<int>> nodesCpus() {
  const std::set<int> own = ownCpus();
  std::vector<std::set<int>> nodes;
  for (int node = 0; fs::exists("/sys/devices/system/node/node" + std::to_string(node)); ++node) {
    std::ifstream list("/sys/devices/system/node/node" + std::to_string(node) + "/cpulist");
    std::string text;
    std::getline(list, text);
    std::set<int> cpus;
    for (const int cpu : parseCpuList(text)) {
      if (own.contains(cpu)) {
        cpus.insert(cpu);
      }
    }
    if (!cpus.empty()) {
      nodes.push_back(cpus);
    }
  }
  return nodes;
}

class DdprunNumaBindingTest : public DdprunBinaryTest {
 protected:
  // A --no-python worker: a shell script writing its Cpus_allowed_list line
  // to <dir>/<LOCAL_RANK>.cpus.
  std::string shellWorker() {
    const fs::path script = dir_ / "print_cpus";
    std::ofstream(script) << "#!/bin/sh\n"
                          << "grep Cpus_allowed_list: /proc/self/status > \""
                          << dir_.path().string() << "/$LOCAL_RANK.cpus\"\n";
    chmod(script.c_str(), 0755);
    return script.string();
  }

  // A Python worker doing the same.
  std::string pythonWorker() {
    const fs::path script = dir_ / "print_cpus.py";
    std::ofstream(script)
        << "import os, sys\n"
        << "line = [l for l in open('/proc/self/status') if l.startswith('Cpus_allowed_list:')]\n"
        << "open(os.path.join(sys.argv[1], os.environ['LOCAL_RANK'] + '.cpus'), 'w')"
        << ".write(line[0])\n";
    return script.string();
  }

  Outcome launch(const std::string& mode, int nproc, std::vector<std::string> worker) {
    std::vector<std::string> args = {"--standalone", "--nproc-per-node", std::to_string(nproc),
                                     "--numa-binding", mode};
    args.insert(args.end(), worker.begin(), worker.end());
    return runFor(args, std::chrono::seconds(60));
  }

  // The CPUs local rank `rank`'s worker said it may run on.
  std::set<int> workerCpus(int rank) const {
    const std::string line = test_support::readFile(dir_ / (std::to_string(rank) + ".cpus"));
    const auto tab = line.find('\t');
    if (tab == std::string::npos) {
      return {};
    }
    return parseCpuList(line.substr(tab + 1, line.find('\n') - tab - 1));
  }
};

// Without --numa-binding the workers may run where ddprun may: nothing ddprun
// does with its own CPUs (its guardian steps off the agent's CPU while it
// makes the job's cgroup) reaches them.
TEST_F(DdprunNumaBindingTest, WithoutABindingEveryWorkerMayUseEveryCpuDdprunMay) {
  const Outcome outcome =
      runFor({"--standalone", "--nproc-per-node", "2", "--no-python", shellWorker()},
             std::chrono::seconds(60));
  ASSERT_TRUE(outcome.status.success()) << outcome.stderr_text;
  EXPECT_EQ(workerCpus(0), ownCpus());
  EXPECT_EQ(workerCpus(1), ownCpus());
}

TEST_F(DdprunNumaBindingTest, ExclusiveGivesTheWorkersDisjointCpusCoveringTheMachine) {
  const Outcome outcome = launch("exclusive", 2, {"--no-python", shellWorker()});
  ASSERT_TRUE(outcome.status.success()) << outcome.stderr_text;
  const std::set<int> first = workerCpus(0);
  const std::set<int> second = workerCpus(1);
  ASSERT_FALSE(first.empty());
  ASSERT_FALSE(second.empty());
  std::set<int> both = first;
  both.insert(second.begin(), second.end());
  EXPECT_EQ(both.size(), first.size() + second.size()) << "the two workers share CPUs";
  EXPECT_EQ(both, ownCpus());
  EXPECT_NE(outcome.stderr_text.find(
                "--numa-binding exclusive, no GPU visible, so the local ranks are spread over the "
                "NUMA nodes: local rank 0: CPUs "),
            std::string::npos)
      << outcome.stderr_text;
}

TEST_F(DdprunNumaBindingTest, NodeGivesEachPythonWorkerEveryCpuOfItsNode) {
  const Outcome outcome = launch("node", 2, {pythonWorker(), dir_.path().string()});
  ASSERT_TRUE(outcome.status.success()) << outcome.stderr_text;
  const std::vector<std::set<int>> nodes = nodesCpus();
  ASSERT_FALSE(nodes.empty());
  for (int rank = 0; rank < 2; ++rank) {
    // ddprun's rule without GPUs: rank i on node i * nodes / nproc.
    EXPECT_EQ(workerCpus(rank), nodes[rank * nodes.size() / 2]) << "local rank " << rank;
  }
}

// hwloc reads HWLOC_SYNTHETIC instead of the machine: here, two NUMA nodes
// (or two L3 caches) of one CPU each, CPUs 0 and 1.
TEST_F(DdprunNumaBindingTest, OnASynthesizedMachineEachWorkerGetsItsOwnNodeOrComplex) {
  if (!ownCpus().contains(0) || !ownCpus().contains(1)) {
    GTEST_SKIP() << "needs CPUs 0 and 1";
  }
  for (const auto& [mode, machine] : {std::pair<std::string, std::string>{"node", "numa:2 pu:1"},
                                      {"core-complex", "numa:1 l3:2 core:1 pu:1"}}) {
    extra_env_ = {{"HWLOC_SYNTHETIC", machine}};
    const Outcome outcome = launch(mode, 2, {"--no-python", shellWorker()});
    ASSERT_TRUE(outcome.status.success()) << outcome.stderr_text;
    EXPECT_EQ(workerCpus(0), (std::set<int>{0})) << mode;
    EXPECT_EQ(workerCpus(1), (std::set<int>{1})) << mode;
  }
}

TEST_F(DdprunNumaBindingTest, ExclusiveWithMoreRanksThanCoresExitsTwoBeforeAnyWorker) {
  const int nproc = static_cast<int>(ownCpus().size()) + 1;
  const Outcome outcome = launch("exclusive", nproc, {"--no-python", shellWorker()});
  EXPECT_EQ(outcome.status, (ExitStatus{ExitStatus::Kind::Exited, 2}));
  EXPECT_EQ(outcome.stderr_text.rfind("ddprun: --numa-binding exclusive: NUMA node ", 0), 0u)
      << outcome.stderr_text;
  EXPECT_NE(outcome.stderr_text.find("local ranks; each needs one of its own"), std::string::npos)
      << outcome.stderr_text;
  EXPECT_FALSE(fs::exists(dir_ / "0.cpus"));
}

}  // namespace
}  // namespace ddprun::launcher

// ddprun started as a Kubernetes pod's entrypoint with nothing but the
// variables an operator writes (test_support/kubernetes_operators.hpp): the
// launch each one means, and the three values torchrun misreads taken as the
// operator meant them, each said in one warning.
#include <gtest/gtest.h>

#include <algorithm>

#include "ddprun/launcher/config/cli.hpp"
#include "ddprun/test_support/kubernetes_operators.hpp"
#include "launcher_test_util.hpp"

namespace ddprun::launcher {
namespace {

namespace k8s = test_support::kubernetes;
using testing::EnvMap;
using testing::parse;
using testing::parseError;

EnvMap envOf(const test_support::Environment& variables) {
  return EnvMap(variables.begin(), variables.end());
}

LaunchConfig podLaunch(const test_support::Environment& variables) {
  return parse({"train.py"}, envOf(variables));
}

std::string source(const LaunchConfig& config, const std::string& dest) {
  const auto found = config.sources.find(dest);
  return found == config.sources.end() ? "default" : found->second;
}

bool warns(const LaunchConfig& config, const std::string& part) {
  return std::any_of(config.warnings.begin(), config.warnings.end(),
                     [&](const std::string& line) { return line.find(part) != std::string::npos; });
}

TEST(CliKubernetes, ATrainJobIsAStaticJobAtNodeZerosHeadlessName) {
  for (const bool first_releases : {false, true}) {
    const LaunchConfig config = podLaunch(k8s::trainJob("mnist", 1, 2, "auto", first_releases));
    EXPECT_EQ(config.rdzv_backend, "static");
    EXPECT_EQ(config.max_nodes, 2);
    EXPECT_EQ(config.node_rank, 1);
    EXPECT_EQ(config.nproc_per_node.kind, NprocPerNode::Kind::kAuto);
    EXPECT_EQ(config.rdzv_endpoint,
              first_releases ? "mnist-trainer-node-0-0.mnist:29500" : "mnist-node-0-0.mnist:29500");
    EXPECT_TRUE(config.warnings.empty()) << config.warnings.front();
  }
  const LaunchConfig counted = podLaunch(k8s::trainJob("mnist", 0, 2, "4"));
  EXPECT_EQ(counted.nproc_per_node, (NprocPerNode{NprocPerNode::Kind::kCount, 4}));
}

TEST(CliKubernetes, APyTorchJobFromV17IsAStaticJobAtItsMastersService) {
  const LaunchConfig config = podLaunch(k8s::pytorchJob("mnist", 2, 3, "2"));
  EXPECT_EQ(config.rdzv_backend, "static");
  EXPECT_EQ(config.max_nodes, 3);
  EXPECT_EQ(config.node_rank, 2);
  EXPECT_EQ(config.rdzv_endpoint, "mnist-master-0:23456");
  EXPECT_EQ(source(config, "master_addr"), "env:PET_MASTER_ADDR");
  EXPECT_TRUE(config.warnings.empty()) << config.warnings.front();
}

// Before v1.7 the operator wrote only MASTER_ADDR and MASTER_PORT: torchrun,
// given --nnodes and --node-rank, meets at 127.0.0.1:29500, each pod alone.
TEST(CliKubernetes, APyTorchJobBeforeV17MeetsAtMasterAddrAndSaysSo) {
  const EnvMap env = envOf(k8s::pytorchJob("mnist", 1, 2, "auto", /*before_1_7=*/true));
  const LaunchConfig config = parse({"--nnodes", "2", "--node-rank", "1", "train.py"}, env);
  EXPECT_EQ(config.rdzv_endpoint, "mnist-master-0:23456");
  EXPECT_EQ(source(config, "master_addr"), "env:MASTER_ADDR");
  EXPECT_EQ(source(config, "master_port"), "env:MASTER_PORT");
  ASSERT_EQ(config.warnings.size(), 1u);
  EXPECT_EQ(config.warnings[0],
            "a static job of 2 nodes with no --master-addr: meeting at MASTER_ADDR=mnist-master-0 "
            "and MASTER_PORT=23456 from the environment, where Kubeflow's PyTorchJob operator "
            "names the master (torchrun would wait at 127.0.0.1 alone)");

  // A master given is the master, with its own port; one node needs no
  // master; nor does an endpoint given.
  EXPECT_EQ(parse({"--nnodes", "2", "--master-addr", "h0", "train.py"}, env).rdzv_endpoint,
            "h0:29500");
  EXPECT_EQ(parse({"--nnodes", "2", "--master-port", "7", "train.py"}, env).rdzv_endpoint,
            "mnist-master-0:7");
  EXPECT_TRUE(parse({"train.py"}, env).warnings.empty());
  EXPECT_EQ(parse({"--nnodes", "2", "--rdzv-endpoint", "h0:1", "train.py"}, env).rdzv_endpoint,
            "h0:1");
  EnvMap bad_port = env;
  bad_port["MASTER_PORT"] = "port";
  EXPECT_EQ(parseError({"--nnodes", "2", "train.py"}, bad_port),
            "MASTER_PORT 'port': not an integer");
}

TEST(CliKubernetes, AnElasticPyTorchJobIsAC10dJobAtWorkerZero) {
  const LaunchConfig config = podLaunch(k8s::elasticPyTorchJob("mnist", "1:3", 2));
  EXPECT_EQ(config.rdzv_backend, "c10d");
  EXPECT_EQ(config.rdzv_endpoint, "mnist-worker-0:23456");
  EXPECT_EQ(config.min_nodes, 1);
  EXPECT_EQ(config.max_nodes, 3);
  EXPECT_EQ(config.max_restarts, 3);
  EXPECT_EQ(config.rdzv_id, "mnist");
  EXPECT_EQ(config.nproc_per_node, (NprocPerNode{NprocPerNode::Kind::kCount, 2}));
  EXPECT_TRUE(config.warnings.empty()) << config.warnings.front();
}

TEST(CliKubernetes, TheElasticSpellingBeforeV17IsTakenAndSaid) {
  const LaunchConfig config =
      podLaunch(k8s::elasticPyTorchJob("mnist", "2", 4, /*before_1_7=*/true));
  EXPECT_EQ(config.nproc_per_node, (NprocPerNode{NprocPerNode::Kind::kCount, 4}));
  EXPECT_EQ(source(config, "nproc_per_node"), "env:PET_N_PROC_PER_NODE");
  EXPECT_TRUE(warns(config,
                    "PET_N_PROC_PER_NODE=4, the spelling of Kubeflow's PyTorchJob "
                    "operator before v1.7: taken as --nproc-per-node"));
  // PET_NPROC_PER_NODE, where both are set, and the flag win.
  EnvMap both = envOf(k8s::elasticPyTorchJob("mnist", "2", 4, true));
  both["PET_NPROC_PER_NODE"] = "3";
  EXPECT_EQ(parse({"train.py"}, both).nproc_per_node.count, 3);
  EXPECT_EQ(parse({"--nproc-per-node", "1", "train.py"}, both).nproc_per_node.count, 1);
  EXPECT_TRUE(parse({"train.py"}, both).warnings.empty());
}

// elasticPolicy.standalone: true is PET_STANDALONE="", on which torchrun's
// int("") fails; any other value is read as an integer, as torchrun reads it.
TEST(CliKubernetes, AnEmptyPetStandaloneIsStandaloneAndSaid) {
  const LaunchConfig config =
      podLaunch(k8s::elasticPyTorchJob("mnist", "1", 2, /*before_1_7=*/false, /*standalone=*/true));
  EXPECT_TRUE(config.standalone);
  EXPECT_EQ(config.rdzv_endpoint, "localhost:0");
  EXPECT_TRUE(warns(config, "PET_STANDALONE is set and empty"));
  EXPECT_FALSE(parse({"train.py"}, {{"PET_STANDALONE", "0"}}).standalone);
  EXPECT_TRUE(parse({"train.py"}, {{"PET_STANDALONE", "0"}}).warnings.empty());
  EXPECT_NE(parseError({"train.py"}, {{"PET_STANDALONE", "yes"}}), "<no error>");
}

}  // namespace
}  // namespace ddprun::launcher

// The ddprun executable as a Kubernetes pod's entrypoint: `ddprun --dry-run
// train.py`-style launches with exactly the variables each operator writes
// (test_support/kubernetes_operators.hpp), and the plan each one prints: the
// nodes, this pod's rank, the workers, the rendezvous and where each value
// came from, with the one line that says where ddprun read an operator's
// value as the operator meant it.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "ddprun/test_support/kubernetes_operators.hpp"
#include "ddprun_binary_fixture.hpp"

namespace ddprun::launcher {
namespace {

namespace k8s = test_support::kubernetes;
using json = nlohmann::json;
using testing::contains;
using testing::DdprunBinaryTest;
using testing::Outcome;

json valued(json value, const std::string& source) {
  return {{"value", std::move(value)}, {"source", source}};
}

class DdprunKubernetesTest : public DdprunBinaryTest {
 protected:
  // The plan of a pod started with `env` and `args` before the program.
  json planOfPod(const test_support::Environment& env, std::vector<std::string> args = {}) {
    extra_env_ = env;
    args.insert(args.begin(), "--dry-run");
    args.insert(args.end(), {"--no-python", DDPRUN_FAKE_WORKER});
    outcome_ = run(args);
    EXPECT_TRUE(outcome_.status.success()) << outcome_.status.describe() << outcome_.stderr_text;
    return outcome_.status.success() ? json::parse(outcome_.stdout_text) : json();
  }

  Outcome outcome_;
};

TEST_F(DdprunKubernetesTest, ATrainJobPodPlansAStaticJobAtNodeZerosHeadlessName) {
  const json plan = planOfPod(k8s::trainJob("mnist", 1, 2, "3"));
  EXPECT_EQ(plan["nnodes"], valued({{"min", 2}, {"max", 2}}, "env:PET_NNODES"));
  EXPECT_EQ(plan["node_rank"], valued(1, "env:PET_NODE_RANK"));
  EXPECT_EQ(plan["nproc_per_node"],
            (json{{"value", 3}, {"asked", "3"}, {"source", "env:PET_NPROC_PER_NODE"}}));
  EXPECT_EQ(plan["rdzv_backend"], valued("static", "default"));
  EXPECT_EQ(plan["rdzv_endpoint"], valued("mnist-node-0-0.mnist:29500", "derived"));
  EXPECT_EQ(plan["master_addr"], valued("mnist-node-0-0.mnist", "env:PET_MASTER_ADDR"));
  EXPECT_FALSE(contains(outcome_.stderr_text, "[warning]")) << outcome_.stderr_text;
}

// TrainJob's default, "auto": the GPUs, else the CPUs.
TEST_F(DdprunKubernetesTest, ATrainJobsAutoCountsThisMachinesWorkers) {
  const json plan = planOfPod(k8s::trainJob("mnist", 0, 2));
  EXPECT_EQ(plan["nproc_per_node"]["asked"], "auto");
  EXPECT_GE(plan["nproc_per_node"]["value"].get<int>(), 1);
}

TEST_F(DdprunKubernetesTest, APyTorchJobPodPlansAStaticJobAtTheMastersService) {
  const json plan = planOfPod(k8s::pytorchJob("mnist", 0, 3, "2"));
  EXPECT_EQ(plan["nnodes"], valued({{"min", 3}, {"max", 3}}, "env:PET_NNODES"));
  EXPECT_EQ(plan["node_rank"], valued(0, "env:PET_NODE_RANK"));
  EXPECT_EQ(plan["rdzv_endpoint"], valued("mnist-master-0:23456", "derived"));
  EXPECT_EQ(plan["master_port"], valued(23456, "env:PET_MASTER_PORT"));
}

TEST_F(DdprunKubernetesTest, APyTorchJobPodBeforeV17PlansTheMastersServiceAndSaysSo) {
  const json plan = planOfPod(k8s::pytorchJob("mnist", 1, 2, "auto", true),
                              {"--nnodes", "2", "--node-rank", "1"});
  EXPECT_EQ(plan["rdzv_endpoint"], valued("mnist-master-0:23456", "derived"));
  EXPECT_EQ(plan["master_addr"], valued("mnist-master-0", "env:MASTER_ADDR"));
  EXPECT_EQ(plan["master_port"], valued(23456, "env:MASTER_PORT"));
  EXPECT_EQ(testing::countOf(outcome_.stderr_text, "meeting at MASTER_ADDR=mnist-master-0"), 1)
      << outcome_.stderr_text;
}

TEST_F(DdprunKubernetesTest, AnElasticPyTorchJobPodPlansC10dAtWorkerZero) {
  for (const bool before_1_7 : {false, true}) {
    SCOPED_TRACE(before_1_7);
    const json plan = planOfPod(k8s::elasticPyTorchJob("mnist", "1:3", 2, before_1_7));
    EXPECT_EQ(plan["nnodes"], valued({{"min", 1}, {"max", 3}}, "env:PET_NNODES"));
    EXPECT_EQ(plan["rdzv_backend"], valued("c10d", "env:PET_RDZV_BACKEND"));
    EXPECT_EQ(plan["rdzv_endpoint"], valued("mnist-worker-0:23456", "env:PET_RDZV_ENDPOINT"));
    EXPECT_EQ(plan["rdzv_id"], valued("mnist", "env:PET_RDZV_ID"));
    EXPECT_EQ(plan["max_restarts"], valued(3, "env:PET_MAX_RESTARTS"));
    EXPECT_EQ(plan["nproc_per_node"]["value"], 2);
    EXPECT_EQ(plan["nproc_per_node"]["source"],
              before_1_7 ? "env:PET_N_PROC_PER_NODE" : "env:PET_NPROC_PER_NODE");
    EXPECT_EQ(contains(outcome_.stderr_text, "PET_N_PROC_PER_NODE=2, the spelling"), before_1_7)
        << outcome_.stderr_text;
  }
}

TEST_F(DdprunKubernetesTest, AStandaloneElasticPyTorchJobPodPlansStandaloneAndSaysSo) {
  const json plan = planOfPod(k8s::elasticPyTorchJob("mnist", "1", 2, false, true));
  EXPECT_EQ(plan["standalone"], valued(true, "env:PET_STANDALONE"));
  EXPECT_TRUE(contains(outcome_.stderr_text, "PET_STANDALONE is set and empty"))
      << outcome_.stderr_text;
}

}  // namespace
}  // namespace ddprun::launcher

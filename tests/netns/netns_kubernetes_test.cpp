// ddprun as the entrypoint of two Kubernetes pods, on lab hosts named as the
// operators name their pods and resolving the names their headless services
// give (NetLab::addNames): each pod gets exactly the variables its operator
// writes (test_support/kubernetes_operators.hpp) and the command line a user
// puts in the pod spec, and the two train a world of 4 to the end.
#include <ostream>
#include <string>
#include <vector>

#include "ddprun/test_support/kubernetes_operators.hpp"
#include "netns_train_fixture.hpp"

namespace ddprun::netns_test {
namespace {

namespace k8s = test_support::kubernetes;

// One operator's two pods: their hosts, the names that resolve to each, and
// what each pod is started with.
struct PodPair {
  std::string name;
  std::vector<std::string> hosts;
  std::vector<std::vector<std::string>> service_names;
  std::vector<Variables> env;                  // per pod
  std::vector<std::vector<std::string>> args;  // per pod, before the train command
  std::string said;                            // a line ddprun must say on every pod, "" for none
};

// Names the case in test output.
void PrintTo(const PodPair& pods, std::ostream* out) { *out << pods.name; }

std::vector<std::string> givenRank(int rank) {
  return {"--nnodes", "2", "--node-rank", std::to_string(rank), "--nproc-per-node", "2"};
}

std::vector<PodPair> podPairs() {
  return {
      {"TrainJobV2",
       {"tj-node-0-0", "tj-node-0-1"},
       {{"tj-node-0-0.tj"}, {"tj-node-0-1.tj"}},
       {k8s::trainJob("tj", 0, 2, "2"), k8s::trainJob("tj", 1, 2, "2")},
       {{}, {}},
       ""},
      {"PyTorchJobV1",
       {"pj-master-0", "pj-worker-0"},
       {{}, {}},
       {k8s::pytorchJob("pj", 0, 2, "2"), k8s::pytorchJob("pj", 1, 2, "2")},
       {{}, {}},
       ""},
      // The operator wrote no PET_ variables then: the pod spec gives the
      // shape, and no --master-addr, as torchrun's users forgot it.
      {"PyTorchJobBeforeV17",
       {"pj-master-0", "pj-worker-0"},
       {{}, {}},
       {k8s::pytorchJob("pj", 0, 2, "2", true), k8s::pytorchJob("pj", 1, 2, "2", true)},
       {givenRank(0), givenRank(1)},
       "meeting at MASTER_ADDR=pj-master-0 and MASTER_PORT=23456"},
      {"ElasticPyTorchJob",
       {"pj-worker-0", "pj-worker-1"},
       {{}, {}},
       {k8s::elasticPyTorchJob("pj", "2", 2), k8s::elasticPyTorchJob("pj", "2", 2)},
       {{}, {}},
       ""},
  };
}

class NetnsKubernetesTest : public NetnsTrainTest, public ::testing::WithParamInterface<PodPair> {};

TEST_P(NetnsKubernetesTest, TwoPodsTrainAWorldOfFourToTheEnd) {
  const PodPair& pods = GetParam();
  own_host_names_ = true;  // a pod's host name is its own
  lab_.emplace(pods.hosts, lab_network_);
  for (std::size_t pod = 0; pod < pods.hosts.size(); ++pod) {
    if (!pods.service_names[pod].empty()) {
      lab_->addNames(pods.hosts[pod], pods.service_names[pod]);
    }
  }
  const std::string train_dir = fs::path(TRAIN_BINARY).parent_path().string();
  std::vector<Subprocess> agents;
  // The second pod first: pods start in no particular order.
  for (int pod : {1, 0}) {
    std::vector<std::string> args = pods.args[pod];
    std::vector<std::string> program = train(2);
    program.front() = "train";
    args.insert(args.end(), program.begin(), program.end());
    agents.push_back(
        ddprunOn("pod" + std::to_string(pod), pods.hosts[pod], args, train_dir, pods.env[pod]));
  }
  for (Subprocess& agent : agents) {
    const auto status = agent.waitFor(180s);
    ASSERT_TRUE(status && status->success()) << describe(status) << logs({"pod0", "pod1"});
  }
  EXPECT_EQ(snapshotEpochs(), 2);
  EXPECT_EQ(groupRank("pod0", 0) + groupRank("pod1", 0), 1) << logs({"pod0", "pod1"});
  const std::string node0 = groupRank("pod0", 0) == 0 ? "pod0" : "pod1";
  EXPECT_TRUE(contains(log(node0), "world 4 (gloo), batch 32 x 4")) << log(node0);
  if (!pods.said.empty()) {
    for (const std::string name : {"pod0", "pod1"}) {
      EXPECT_TRUE(contains(log(name), pods.said)) << log(name);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Operators, NetnsKubernetesTest, ::testing::ValuesIn(podPairs()),
                         [](const ::testing::TestParamInfo<PodPair>& pods) {
                           return pods.param.name;
                         });

}  // namespace
}  // namespace ddprun::netns_test

// deploy/kubernetes's manifests, checked without a cluster: each is read
// (PyYAML, through the test's Python) and held to the rules its operator
// enforces when the job is created (TrainJob: no torchrun variable of its
// own in the trainer's env, numProcPerNode an integer or auto, cpu, gpu;
// PyTorchJob: the container named pytorch with the port named
// pytorchjob-port; the elastic job's rendezvous a port of ddprund's Service),
// and every trainer pod's command line runs as `ddprun --dry-run` with the
// variables its operator writes into that pod, planning the job the
// manifest describes.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "ddprun/test_support/command.hpp"
#include "ddprun/test_support/kubernetes_operators.hpp"

namespace ddprun::launcher {
namespace {

namespace k8s = test_support::kubernetes;
using json = nlohmann::json;

// Every document of deploy/kubernetes/<file>, as JSON.
std::vector<json> manifest(const std::string& file) {
  const std::string path = std::string(DDPRUN_KUBERNETES_DIR) + "/" + file;
  const auto read = test_support::runCommand(
      {DDPRUN_TORCH_PYTHON, "-c",
       "import json, sys, yaml\n"
       "json.dump(list(yaml.safe_load_all(open(sys.argv[1]))), sys.stdout)",
       path},
      {});
  EXPECT_EQ(read.code, 0) << read.errors;
  return json::parse(read.output).get<std::vector<json>>();
}

// `container`'s command and args run as `ddprun --dry-run ...` with `env`:
// the plan, or null if ddprun refused them.
json dryRun(const json& container, const test_support::Environment& env) {
  std::vector<std::string> argv = container["command"].get<std::vector<std::string>>();
  EXPECT_EQ(argv.front(), "ddprun");
  argv.front() = DDPRUN_BINARY;
  argv.insert(argv.begin() + 1, "--dry-run");
  for (const auto& arg : container["args"]) {
    argv.push_back(arg.get<std::string>());
  }
  test_support::Environment pod_env = env;
  pod_env.emplace_back("PATH", std::string(DDPRUN_TRAIN_DIR) + ":/usr/bin:/bin");
  const auto run = test_support::runCommand(argv, {pod_env});
  EXPECT_EQ(run.code, 0) << run.errors;
  return run.code == 0 ? json::parse(run.output) : json(nullptr);
}

const std::set<std::string> kTorchrunReserved = {
    "PET_NNODES", "PET_NPROC_PER_NODE", "PET_NODE_RANK", "PET_MASTER_ADDR", "PET_MASTER_PORT"};

TEST(KubernetesManifests, TheTrainJobPlansAStaticJobOnEachNode) {
  const std::vector<json> docs = manifest("trainjob.yaml");
  ASSERT_EQ(docs.size(), 1u);
  const json& job = docs[0];
  EXPECT_EQ(job["kind"], "TrainJob");
  const json& trainer = job["spec"]["trainer"];
  for (const auto& variable : trainer.value("env", json::array())) {
    EXPECT_FALSE(kTorchrunReserved.contains(variable["name"].get<std::string>()))
        << "the operator refuses " << variable["name"];
  }
  const json& nproc = trainer["numProcPerNode"];
  ASSERT_TRUE(nproc.is_number_integer()) << nproc;
  const std::string name = job["metadata"]["name"];
  const int nodes = trainer["numNodes"];
  for (int rank = 0; rank < nodes; ++rank) {
    SCOPED_TRACE(rank);
    const json plan =
        dryRun(trainer, k8s::trainJob(name, rank, nodes, std::to_string(nproc.get<int>())));
    ASSERT_FALSE(plan.is_null());
    EXPECT_EQ(plan["nnodes"]["value"]["max"], nodes);
    EXPECT_EQ(plan["node_rank"]["value"], rank);
    EXPECT_EQ(plan["nproc_per_node"]["value"], nproc);
    EXPECT_EQ(plan["rdzv_endpoint"]["value"], name + "-node-0-0." + name + ":29500");
  }
}

// The operator looks for the port on the container named pytorch.
const json& pytorchContainer(const json& replica) {
  const json& containers = replica["template"]["spec"]["containers"];
  for (const json& container : containers) {
    if (container["name"] == "pytorch") {
      bool has_port = false;
      for (const json& port : container.value("ports", json::array())) {
        has_port = has_port || port["name"] == "pytorchjob-port";
      }
      EXPECT_TRUE(has_port) << "no port named pytorchjob-port";
      return container;
    }
  }
  ADD_FAILURE() << "no container named pytorch";
  return containers.at(0);
}

TEST(KubernetesManifests, ThePyTorchJobPlansAStaticJobAtTheMaster) {
  const std::vector<json> docs = manifest("pytorchjob.yaml");
  ASSERT_EQ(docs.size(), 1u);
  const json& spec = docs[0]["spec"];
  const std::string name = docs[0]["metadata"]["name"];
  const json& replicas = spec["pytorchReplicaSpecs"];
  const int workers = replicas["Worker"]["replicas"];
  const int nodes = 1 + workers;
  const std::string nproc = spec["nprocPerNode"];
  for (int rank = 0; rank < nodes; ++rank) {
    SCOPED_TRACE(rank);
    const json& container = pytorchContainer(replicas[rank == 0 ? "Master" : "Worker"]);
    const json plan = dryRun(container, k8s::pytorchJob(name, rank, nodes, nproc));
    ASSERT_FALSE(plan.is_null());
    EXPECT_EQ(plan["nnodes"]["value"]["max"], nodes);
    EXPECT_EQ(plan["node_rank"]["value"], rank);
    EXPECT_EQ(plan["nproc_per_node"]["value"], std::stoi(nproc));
    EXPECT_EQ(plan["rdzv_endpoint"]["value"], name + "-master-0:23456");
  }
}

TEST(KubernetesManifests, TheElasticPyTorchJobPlansC10dAtDdprundsService) {
  const std::vector<json> docs = manifest("pytorchjob-elastic.yaml");
  ASSERT_EQ(docs.size(), 1u);
  const json& policy = docs[0]["spec"]["elasticPolicy"];
  const std::string endpoint =
      policy["rdzvHost"].get<std::string>() + ":" + std::to_string(policy["rdzvPort"].get<int>());
  const std::string nnodes = std::to_string(policy["minReplicas"].get<int>()) + ":" +
                             std::to_string(policy["maxReplicas"].get<int>());
  const json& container = pytorchContainer(docs[0]["spec"]["pytorchReplicaSpecs"]["Worker"]);
  for (const bool before_1_7 : {false, true}) {
    SCOPED_TRACE(before_1_7);
    const json plan =
        dryRun(container, k8s::elasticPyTorchJob(policy["rdzvId"], nnodes, policy["nProcPerNode"],
                                                 before_1_7, false, endpoint));
    ASSERT_FALSE(plan.is_null());
    EXPECT_EQ(plan["rdzv_backend"]["value"], "c10d");
    EXPECT_EQ(plan["rdzv_endpoint"]["value"], endpoint);
    EXPECT_EQ(plan["nnodes"]["value"], (json{{"min", 2}, {"max", 4}}));
    EXPECT_EQ(plan["nproc_per_node"]["value"], policy["nProcPerNode"]);
  }

  // The rendezvous it names is ddprund's Service, on the container's port.
  const std::vector<json> ddprund = manifest("ddprund.yaml");
  ASSERT_EQ(ddprund.size(), 2u);
  const json& service = ddprund[1];
  EXPECT_EQ(service["kind"], "Service");
  EXPECT_EQ(service["metadata"]["name"], policy["rdzvHost"]);
  bool serves_rendezvous = false;
  for (const json& port : service["spec"]["ports"]) {
    serves_rendezvous = serves_rendezvous || port["port"] == policy["rdzvPort"];
  }
  EXPECT_TRUE(serves_rendezvous);
  const json& daemon = ddprund[0]["spec"]["template"]["spec"]["containers"][0];
  const auto command = daemon["command"].get<std::vector<std::string>>();
  EXPECT_EQ(command.front(), "ddprund");
  EXPECT_NE(
      std::find(command.begin(), command.end(), std::to_string(policy["rdzvPort"].get<int>())),
      command.end());
}

}  // namespace
}  // namespace ddprun::launcher

// --dry-run's plan (docs/torchrun-contract.md §2.5): one JSON object whose
// launch values each carry where they came from, whatever decided them (the
// defaults, a flag, a PET_ variable, another variable, the derived rules, Slurm).
#include "ddprun/launcher/config/launch_plan.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "launcher_test_util.hpp"

namespace ddprun::launcher {
namespace {

using nlohmann::json;
using testing::EnvMap;
using testing::kTestRunId;
using testing::parse;

json planOf(const LaunchConfig& config, int nproc = 1) {
  ResolvedLaunch resolved;
  resolved.nproc = nproc;
  resolved.python = "/usr/bin/python3";
  resolved.python_source = "derived";
  resolved.worker_argv = {"/usr/bin/python3", "-u", "train.py", "--lr", "0.1"};
  return json::parse(launchPlanJson(config, resolved));
}

json valued(json value, const std::string& source) {
  return {{"value", std::move(value)}, {"source", source}};
}

TEST(LaunchPlan, EveryLaunchValueHasItsValueAndSource) {
  const json plan = planOf(parse({"train.py", "--lr", "0.1"}));
  for (const char* key :
       {"nnodes", "node_rank", "nproc_per_node", "rdzv_backend", "rdzv_endpoint", "rdzv_id",
        "rdzv_conf", "max_restarts", "standalone", "master_addr", "master_port", "log_dir",
        "shutdown_timeout", "uninterruptible_state_timeout", "worker_command", "python"}) {
    SCOPED_TRACE(key);
    ASSERT_TRUE(plan.contains(key));
    EXPECT_TRUE(plan[key].contains("value"));
    EXPECT_TRUE(plan[key]["source"].is_string());
  }
  EXPECT_EQ(plan["nnodes"], valued({{"min", 1}, {"max", 1}}, "default"));
  EXPECT_EQ(plan["node_rank"], valued(0, "default"));
  EXPECT_EQ(plan["max_restarts"], valued(0, "default"));
  EXPECT_EQ(plan["log_dir"], valued(nullptr, "default"));
  EXPECT_EQ(plan["master_port"], valued(nullptr, "default"));
  EXPECT_EQ(plan["slurm"], nullptr);
  EXPECT_EQ(plan["worker_command"],
            valued({"/usr/bin/python3", "-u", "train.py", "--lr", "0.1"}, "flag"));
  EXPECT_EQ(plan["python"], valued("/usr/bin/python3", "derived"));
  EXPECT_EQ(plan["uninterruptible_state_timeout"], valued(nullptr, "default"));
}

TEST(LaunchPlan, TheSingleNodeDefaultIsDerivedStandalone) {
  const json plan = planOf(parse({"train.py"}));
  EXPECT_EQ(plan["standalone"], valued(true, "derived"));
  EXPECT_EQ(plan["rdzv_backend"], valued("c10d", "derived"));
  EXPECT_EQ(plan["rdzv_endpoint"], valued("localhost:0", "derived"));
  EXPECT_EQ(plan["rdzv_id"], valued(kTestRunId, "derived"));
  EXPECT_EQ(planOf(parse({"--standalone", "train.py"}))["standalone"], valued(true, "flag"));
}

TEST(LaunchPlan, FlagsPetVariablesAndOtherVariablesAreNamed) {
  const EnvMap env = {{"PET_NPROC_PER_NODE", "gpu"},
                      {"PET_MAX_RESTARTS", "2"},
                      {"TORCH_ELASTIC_SHUTDOWN_TIMEOUT", "7"},
                      {"TORCHELASTIC_UNINTERRUPTIBLE_STATE_TIMEOUT", "90"}};
  const json plan =
      planOf(parse({"--nnodes=2", "--node-rank=1", "--master-addr=node0", "--max-restarts=3",
                    "--rdzv-conf=join_timeout=5,is_host=1", "--log-dir=/tmp/l", "train.py"},
                   env),
             8);
  EXPECT_EQ(plan["nnodes"], valued({{"min", 2}, {"max", 2}}, "flag"));
  EXPECT_EQ(plan["node_rank"], valued(1, "flag"));
  EXPECT_EQ(plan["nproc_per_node"],
            (json{{"value", 8}, {"asked", "gpu"}, {"source", "env:PET_NPROC_PER_NODE"}}));
  EXPECT_EQ(plan["max_restarts"], valued(3, "flag"));  // the flag wins over PET_MAX_RESTARTS
  EXPECT_EQ(plan["rdzv_backend"], valued("static", "default"));
  EXPECT_EQ(plan["rdzv_endpoint"], valued("node0:29500", "derived"));
  EXPECT_EQ(plan["master_addr"], valued("node0", "flag"));
  EXPECT_EQ(plan["rdzv_conf"], valued({{"join_timeout", 5.0}, {"is_host", true}}, "flag"));
  EXPECT_EQ(plan["log_dir"], valued("/tmp/l", "flag"));
  EXPECT_EQ(plan["shutdown_timeout"], valued(7, "env:TORCH_ELASTIC_SHUTDOWN_TIMEOUT"));
  EXPECT_EQ(plan["uninterruptible_state_timeout"],
            valued(90.0, "env:TORCHELASTIC_UNINTERRUPTIBLE_STATE_TIMEOUT"));
  EXPECT_EQ(plan["standalone"], valued(false, "default"));
}

TEST(LaunchPlan, ALaunchDerivedFromSlurmNamesItsVariables) {
  const EnvMap env = {{"SLURM_JOB_ID", "42"},
                      {"SLURM_STEP_ID", "3"},
                      {"SLURM_STEP_NODELIST", "n[7-8]"},
                      {"SLURM_STEP_NUM_NODES", "2"},
                      {"SLURM_NODEID", "1"}};
  const json plan = planOf(parse({"--nproc-per-node=2", "train.py"}, env), 2);
  EXPECT_EQ(plan["nnodes"], valued({{"min", 2}, {"max", 2}}, "slurm:SLURM_STEP_NUM_NODES"));
  EXPECT_EQ(plan["node_rank"], valued(1, "slurm:SLURM_NODEID"));
  EXPECT_EQ(plan["rdzv_backend"], valued("c10d", "slurm:SLURM_STEP_NODELIST"));
  // 20000 + (42 + 6180 * 3) mod 10000: step 3 of job 42 (docs/slurm.md).
  EXPECT_EQ(plan["rdzv_endpoint"], valued("n7:28582", "slurm:SLURM_STEP_NODELIST"));
  EXPECT_EQ(plan["rdzv_id"], valued("slurm-42.3", "slurm:SLURM_JOB_ID"));
  EXPECT_EQ(plan["nproc_per_node"], (json{{"value", 2}, {"asked", "2"}, {"source", "flag"}}));
  EXPECT_EQ(plan["slurm"], (json{{"job_id", "42"}, {"step_id", "3"}, {"node_list", "n[7-8]"}}));
  const json gpus_or_one = planOf(parse({"train.py"}, env), 1)["nproc_per_node"];
  EXPECT_EQ(gpus_or_one, (json{{"value", 1}, {"asked", "gpu, else 1"}, {"source", "derived"}}));
}

}  // namespace
}  // namespace ddprun::launcher

// The launch derived from a Slurm step's environment (docs/torchrun-contract.md
// §3.12), from fixed environments: what srun sets, its fallbacks, every
// value the user gives winning on its own, a hand-wired rendezvous left as
// without Slurm, --no-slurm, the batch script's warning, the refusals, and
// the info line.
#include "ddprun/launcher/slurm/slurm_launch.hpp"

#include <gtest/gtest.h>

#include <set>

#include "launcher_test_util.hpp"
#include "srun_step_env.hpp"

namespace ddprun::launcher {
namespace {

using testing::EnvMap;
using testing::parse;
using Kind = NprocPerNode::Kind;
using Args = std::vector<std::string>;

EnvMap srunStep() {
  const auto variables = testing::srunStepVariables();
  return {variables.begin(), variables.end()};
}

EnvMap with(EnvMap env, const EnvMap& changes) {
  for (const auto& [name, value] : changes) {
    env[name] = value;
  }
  return env;
}

EnvMap without(EnvMap env, const std::vector<std::string>& names) {
  for (const auto& name : names) {
    env.erase(name);
  }
  return env;
}

std::string sourceOf(const LaunchConfig& config, const std::string& dest) {
  const auto found = config.sources.find(dest);
  return found == config.sources.end() ? "default" : found->second;
}

// The SlurmError's line, or "<no error>"; another error fails the test.
std::string slurmError(const Args& args, const EnvMap& env) {
  try {
    parse(args, env);
  } catch (const SlurmError& error) {
    return error.what();
  }
  return "<no error>";
}

TEST(SlurmLaunch, UnderSrunTheWholeLaunchIsDerived) {
  const LaunchConfig config = parse({"train.py"}, srunStep());
  EXPECT_EQ(config.min_nodes, 2);
  EXPECT_EQ(config.max_nodes, 2);
  EXPECT_EQ(config.rdzv_backend, "c10d");
  EXPECT_EQ(config.rdzv_endpoint, "gpu001:21234");
  ASSERT_TRUE(config.rdzv_address);
  EXPECT_EQ(*config.rdzv_address, (Endpoint{"gpu001", 21234}));
  EXPECT_EQ(config.rdzv_id, "slurm-1234.0");
  EXPECT_EQ(config.node_rank, 1);
  EXPECT_EQ(config.nproc_per_node, (NprocPerNode{Kind::kCount, 4}));
  EXPECT_FALSE(config.standalone || config.auto_standalone);
  EXPECT_EQ(config.slurm, (SlurmStepInfo{"1234", "0", "gpu[001-002]"}));
  EXPECT_EQ(sourceOf(config, "nnodes"), "slurm:SLURM_STEP_NUM_NODES");
  EXPECT_EQ(sourceOf(config, "rdzv_backend"), "slurm:SLURM_STEP_NODELIST");
  EXPECT_EQ(sourceOf(config, "rdzv_endpoint"), "slurm:SLURM_STEP_NODELIST");
  EXPECT_EQ(sourceOf(config, "rdzv_id"), "slurm:SLURM_JOB_ID");
  EXPECT_EQ(sourceOf(config, "node_rank"), "slurm:SLURM_NODEID");
  EXPECT_EQ(sourceOf(config, "nproc_per_node"), "slurm:SLURM_GPUS_ON_NODE");
  // SLURM_NODEID is every node's rank: no warning that c10d ignores it.
  EXPECT_TRUE(config.warnings.empty()) << config.warnings.front();
}

TEST(SlurmLaunch, TheEndpointIsTheStepsFirstHostNotTheJobs) {
  // `srun -N1 -w gpu007` inside a larger job: the step is one node.
  const LaunchConfig config =
      parse({"train.py"}, with(srunStep(), {{"SLURM_JOB_NODELIST", "gpu[001-008]"},
                                            {"SLURM_STEP_NODELIST", "gpu[007-008]"}}));
  EXPECT_EQ(config.rdzv_endpoint, "gpu007:21234");
}

TEST(SlurmLaunch, ThePortComesFromTheJobIdWithinItsRange) {
  const auto endpointFor = [](const std::string& job_id) {
    return parse({"t.py"}, with(srunStep(), {{"SLURM_JOB_ID", job_id}})).rdzv_address->port;
  };
  EXPECT_EQ(endpointFor("1234"), 21234);
  EXPECT_EQ(endpointFor("10000"), 20000);
  EXPECT_EQ(endpointFor("123456789"), 26789);
  EXPECT_EQ(endpointFor("99999999999999999999999"), 29999);  // any length
}

// Two steps of one job on the same first host (srun twice, in the
// background) must not meet at one port; nor steps of neighbouring jobs.
// Step 0 keeps the job's port; later steps are kSlurmStepStride apart.
TEST(SlurmLaunch, EachStepOfAJobHasAPortOfItsOwn) {
  const auto portOf = [](int job_id, int step_id) {
    return parse({"t.py"}, with(srunStep(), {{"SLURM_JOB_ID", std::to_string(job_id)},
                                             {"SLURM_STEP_ID", std::to_string(step_id)}}))
        .rdzv_address->port;
  };
  EXPECT_EQ(portOf(1234, 0), 21234);
  EXPECT_EQ(portOf(1234, 1), 27414);  // 20000 + (1234 + 6180) % 10000
  EXPECT_EQ(portOf(1234, 2), 23594);
  std::set<int> ports;
  for (int job = 1234 - 899; job <= 1234 + 899; ++job) {
    for (int step = 0; step <= 7; ++step) {
      if (job == 1234 || step == 0) {
        ports.insert(portOf(job, step));
      }
    }
  }
  // Steps 0-7 of job 1234 and step 0 of each job within 899 of it: all apart.
  EXPECT_EQ(ports.size(), 2u * 899 + 1 + 7);
  EXPECT_EQ(parse({"t.py"}, without(srunStep(), {"SLURM_STEP_ID"})).rdzv_address->port, 21234);
}

TEST(SlurmLaunch, CountsFallBackToTheJobsVariablesThenToTheNodeList) {
  EnvMap env = without(srunStep(), {"SLURM_STEP_NUM_NODES"});
  env["SLURM_NNODES"] = "3";
  env["SLURM_JOB_NUM_NODES"] = "5";
  env["SLURM_STEP_TASKS_PER_NODE"] = "1(x3)";
  env["SLURM_STEP_NUM_TASKS"] = "3";
  LaunchConfig config = parse({"t.py"}, env);
  EXPECT_EQ(config.max_nodes, 3);
  EXPECT_EQ(sourceOf(config, "nnodes"), "slurm:SLURM_NNODES");
  env.erase("SLURM_NNODES");
  env["SLURM_STEP_NUM_TASKS"] = "1";
  config = parse({"t.py"}, env);
  EXPECT_EQ(config.max_nodes, 5);
  EXPECT_EQ(sourceOf(config, "nnodes"), "slurm:SLURM_JOB_NUM_NODES");
  env.erase("SLURM_JOB_NUM_NODES");
  config = parse({"t.py"}, env);
  EXPECT_EQ(config.max_nodes, 2);
  EXPECT_EQ(sourceOf(config, "nnodes"), "slurm:SLURM_STEP_NODELIST");
}

TEST(SlurmLaunch, WithoutGpusOnNodeTheVisibleGpusElseOneWorker) {
  for (const EnvMap& env : {without(srunStep(), {"SLURM_GPUS_ON_NODE"}),
                            with(srunStep(), {{"SLURM_GPUS_ON_NODE", "0"}})}) {
    const LaunchConfig config = parse({"t.py"}, env);
    EXPECT_EQ(config.nproc_per_node.kind, Kind::kGpusElseDefault);
    EXPECT_EQ(sourceOf(config, "nproc_per_node"), "derived");
  }
}

TEST(SlurmLaunch, WithoutStepIdOrNodeIdTheRunIdAndRankDoWithout) {
  const LaunchConfig config =
      parse({"t.py"}, without(srunStep(), {"SLURM_STEP_ID", "SLURM_NODEID"}));
  EXPECT_EQ(config.rdzv_id, "slurm-1234");
  EXPECT_EQ(config.node_rank, 0);
  EXPECT_EQ(sourceOf(config, "node_rank"), "default");
}

TEST(SlurmLaunch, EveryValueTheUserGivesWinsAndTheRestIsDerived) {
  LaunchConfig config = parse({"--nproc-per-node=2", "t.py"}, srunStep());
  EXPECT_EQ(config.nproc_per_node, (NprocPerNode{Kind::kCount, 2}));
  EXPECT_EQ(sourceOf(config, "nproc_per_node"), "flag");
  EXPECT_EQ(config.rdzv_endpoint, "gpu001:21234");
  EXPECT_EQ(config.max_nodes, 2);

  config = parse({"--nnodes=1:4", "t.py"}, srunStep());
  EXPECT_EQ(config.min_nodes, 1);
  EXPECT_EQ(config.max_nodes, 4);
  EXPECT_EQ(sourceOf(config, "nnodes"), "flag");
  EXPECT_EQ(config.rdzv_id, "slurm-1234.0");

  config = parse({"--rdzv-id=mine", "--node-rank=0", "--nproc-per-node=gpu", "t.py"}, srunStep());
  EXPECT_EQ(config.rdzv_id, "mine");
  EXPECT_EQ(config.node_rank, 0);
  EXPECT_EQ(sourceOf(config, "node_rank"), "flag");
  EXPECT_EQ(config.nproc_per_node.kind, Kind::kGpu);
  EXPECT_EQ(config.rdzv_backend, "c10d");

  config = parse({"t.py"}, with(srunStep(), {{"PET_NNODES", "2:3"}, {"PET_NPROC_PER_NODE", "3"}}));
  EXPECT_EQ(config.max_nodes, 3);
  EXPECT_EQ(sourceOf(config, "nnodes"), "env:PET_NNODES");
  EXPECT_EQ(config.nproc_per_node.count, 3);
  EXPECT_EQ(sourceOf(config, "nproc_per_node"), "env:PET_NPROC_PER_NODE");
  EXPECT_EQ(config.rdzv_endpoint, "gpu001:21234");
}

// A torchrun-style job script, whatever Slurm's variables say (bad ones
// included: they are not read).
TEST(SlurmLaunch, AHandWiredRendezvousIsLeftAsWithoutSlurm) {
  const EnvMap odd_step =
      with(srunStep(), {{"SLURM_STEP_NODELIST", "a[3-1]"}, {"SLURM_STEP_TASKS_PER_NODE", "4(x2)"}});
  const std::vector<std::pair<Args, EnvMap>> hand_wired = {
      {{"--standalone"}, {}},
      {{"--rdzv-backend=static", "--nnodes=2", "--node-rank=1"}, {}},
      {{"--rdzv-backend=c10d", "--rdzv-endpoint=node0:29400", "--nnodes=2"}, {}},
      {{"--nnodes=2", "--node-rank=1", "--master-addr=node0"}, {}},
      {{"--nnodes=2", "--node-rank=1", "--master-port=29511"}, {}},
      {{"--nnodes=2"}, {{"PET_RDZV_ENDPOINT", "node0:29400"}, {"PET_RDZV_BACKEND", "c10d"}}},
      {{}, {{"PET_STANDALONE", "1"}}},
  };
  for (const auto& [flags, pet] : hand_wired) {
    Args args = flags;
    args.push_back("t.py");
    SCOPED_TRACE(::testing::PrintToString(args));
    const LaunchConfig plain = parse(args, pet);
    for (const EnvMap& slurm : {srunStep(), odd_step}) {
      EnvMap env = slurm;
      env.insert(pet.begin(), pet.end());
      const LaunchConfig config = parse(args, env);
      EXPECT_FALSE(config.slurm);
      EXPECT_EQ(config.rdzv_backend, plain.rdzv_backend);
      EXPECT_EQ(config.rdzv_endpoint, plain.rdzv_endpoint);
      EXPECT_EQ(config.rdzv_id, plain.rdzv_id);
      EXPECT_EQ(config.max_nodes, plain.max_nodes);
      EXPECT_EQ(config.node_rank, plain.node_rank);
      EXPECT_EQ(config.nproc_per_node, plain.nproc_per_node);
      EXPECT_EQ(config.sources, plain.sources);
      EXPECT_EQ(config.warnings, plain.warnings);
    }
  }
}

TEST(SlurmLaunch, NoSlurmTurnsTheDerivationOff) {
  for (const auto& [args, env] : std::vector<std::pair<Args, EnvMap>>{
           {{"--no-slurm", "t.py"}, srunStep()},
           {{"t.py"}, with(srunStep(), {{"PET_NO_SLURM", "1"}})},
       }) {
    const LaunchConfig config = parse(args, env);
    EXPECT_FALSE(config.slurm);
    EXPECT_TRUE(config.auto_standalone);  // torchrun's single-node default
    EXPECT_EQ(config.max_nodes, 1);
  }
  EXPECT_TRUE(parse({"t.py"}, with(srunStep(), {{"PET_NO_SLURM", "0"}})).slurm);
}

// A ddprun run by a worker inherits the step's variables, but the step, its
// run id and its port belong to the outer launch: joining its rendezvous
// would make the inner ddprun a spare of the training job.
TEST(SlurmLaunch, InsideAWorkerOfAnotherLaunchNothingIsDerived) {
  const LaunchConfig config =
      parse({"t.py"}, with(srunStep(), {{"TORCHELASTIC_RUN_ID", "slurm-1234.0"}}));
  EXPECT_FALSE(config.slurm);
  EXPECT_TRUE(config.auto_standalone);
  EXPECT_EQ(config.max_nodes, 1);
  ASSERT_EQ(config.warnings.size(), 1u);
  EXPECT_NE(config.warnings.front().find("inside a worker of run 'slurm-1234.0'"),
            std::string::npos)
      << config.warnings.front();
}

TEST(SlurmLaunch, OutsideSrunAJobOfSeveralNodesIsWarnedItRunsHereOnly) {
  const EnvMap batch = {{"SLURM_JOB_ID", "77"},
                        {"SLURM_JOB_NODELIST", "n[1-2]"},
                        {"SLURM_JOB_NUM_NODES", "2"},
                        {"SLURM_NNODES", "2"},
                        {"SLURM_NODEID", "0"}};
  LaunchConfig config = parse({"t.py"}, batch);
  EXPECT_FALSE(config.slurm);
  EXPECT_TRUE(config.auto_standalone);
  ASSERT_EQ(config.warnings.size(), 1u);
  EXPECT_EQ(config.warnings.front(),
            "Slurm job 77 has 2 nodes (SLURM_JOB_NUM_NODES), but this ddprun was not started by "
            "srun (no SLURM_STEP_NODELIST), so it launches on this node only; to use every node, "
            "run `srun --ntasks-per-node=1 ddprun ...` in the job script");
  EXPECT_TRUE(parse({"t.py"}, with(batch, {{"SLURM_JOB_NUM_NODES", "1"}})).warnings.empty());
  EXPECT_TRUE(parse({"--no-slurm", "t.py"}, batch).warnings.empty());
  EXPECT_TRUE(parse({"--standalone", "t.py"}, batch).warnings.empty());
}

TEST(SlurmLaunch, SeveralTasksOnANodeAreRefusedSayingHowToLaunch) {
  const std::string how =
      ", but ddprun starts every worker of its node itself and needs one task per node: launch "
      "it with `srun --ntasks-per-node=1 ddprun ...` (or --no-slurm and a rendezvous of your "
      "own)";
  EXPECT_EQ(slurmError({"t.py"}, with(srunStep(), {{"SLURM_STEP_TASKS_PER_NODE", "1,2(x1)"}})),
            "Slurm step 1234.0 runs 2 tasks on a node (SLURM_STEP_TASKS_PER_NODE=1,2(x1))" + how);
  EXPECT_EQ(slurmError({"t.py"}, with(without(srunStep(), {"SLURM_STEP_TASKS_PER_NODE"}),
                                      {{"SLURM_STEP_NUM_TASKS", "8"}})),
            "Slurm step 1234.0 runs 8 tasks on 2 nodes (SLURM_STEP_NUM_TASKS=8)" + how);
  EXPECT_EQ(
      slurmError({"t.py"},
                 with(without(srunStep(), {"SLURM_STEP_TASKS_PER_NODE", "SLURM_STEP_NUM_TASKS"}),
                      {{"SLURM_NTASKS", "4"}})),
      "Slurm step 1234.0 runs 4 tasks on 2 nodes (SLURM_NTASKS=4)" + how);
  // Flags do not change how many tasks srun started.
  EXPECT_EQ(slurmError({"--nnodes=8", "--nproc-per-node=1", "t.py"},
                       with(srunStep(), {{"SLURM_STEP_NUM_TASKS", "8"}})),
            "Slurm step 1234.0 runs 8 tasks on 2 nodes (SLURM_STEP_NUM_TASKS=8)" + how);
}

TEST(SlurmLaunch, ABadVariableIsOneLineNamingItAndItsValue) {
  const auto error = [](const EnvMap& changes) {
    return slurmError({"t.py"}, with(srunStep(), changes));
  };
  EXPECT_EQ(error({{"SLURM_STEP_NODELIST", "gpu[3-1]"}}),
            "SLURM_STEP_NODELIST 'gpu[3-1]': the range 3-1 is reversed");
  EXPECT_EQ(error({{"SLURM_STEP_NODELIST", ""}}), "SLURM_STEP_NODELIST '': is empty");
  EXPECT_EQ(error({{"SLURM_JOB_ID", "12a"}}), "SLURM_JOB_ID '12a': expected a number");
  EXPECT_EQ(error({{"SLURM_STEP_ID", "x"}}), "SLURM_STEP_ID 'x': expected a number");
  EXPECT_EQ(error({{"SLURM_STEP_NUM_NODES", "0"}}), "SLURM_STEP_NUM_NODES '0': must be >= 1");
  EXPECT_EQ(error({{"SLURM_NODEID", "-1"}}), "SLURM_NODEID '-1': must be >= 0");
  EXPECT_EQ(error({{"SLURM_GPUS_ON_NODE", "four"}}), "SLURM_GPUS_ON_NODE 'four': not an integer");
  EXPECT_EQ(error({{"SLURM_STEP_TASKS_PER_NODE", "1(2)"}}),
            "SLURM_STEP_TASKS_PER_NODE '1(2)': expected counts such as 2(x3),1");
}

TEST(SlurmLaunch, AOneNodeStepIsC10dOnThatNodeAlone) {
  const LaunchConfig config =
      parse({"t.py"}, with(srunStep(), {{"SLURM_STEP_NODELIST", "gpu005"},
                                        {"SLURM_STEP_NUM_NODES", "1"},
                                        {"SLURM_NODEID", "0"},
                                        {"SLURM_STEP_NUM_TASKS", "1"},
                                        {"SLURM_STEP_TASKS_PER_NODE", "1"}}));
  EXPECT_EQ(config.max_nodes, 1);
  EXPECT_EQ(config.rdzv_backend, "c10d");
  EXPECT_FALSE(config.auto_standalone);
  EXPECT_EQ(describeSlurmLaunch(config, 4, false),
            "Slurm job 1234 step 0: 1 node (SLURM_STEP_NUM_NODES), node rank 0 (SLURM_NODEID), "
            "c10d on this node alone (no rendezvous needed), run id slurm-1234.0, 4 workers per "
            "node (SLURM_GPUS_ON_NODE)");
}

TEST(SlurmLaunch, TheInfoLineNamesWhereEachValueCameFrom) {
  EXPECT_EQ(describeSlurmLaunch(parse({"t.py"}, srunStep()), 4, false),
            "Slurm job 1234 step 0: 2 nodes (SLURM_STEP_NUM_NODES), node rank 1 (SLURM_NODEID), "
            "c10d rendezvous at gpu001:21234 (first host of SLURM_STEP_NODELIST; port from "
            "SLURM_JOB_ID and SLURM_STEP_ID), run id slurm-1234.0, 4 workers per node "
            "(SLURM_GPUS_ON_NODE)");
  EXPECT_EQ(
      describeSlurmLaunch(parse({"--nnodes=1:4", "--nproc-per-node=1", "--rdzv-id=r7", "t.py"},
                                with(srunStep(), {{"PET_NODE_RANK", "3"}})),
                          1, false),
      "Slurm job 1234 step 0: 1:4 nodes (--nnodes), node rank 3 (PET_NODE_RANK), c10d "
      "rendezvous at gpu001:21234 (first host of SLURM_STEP_NODELIST; port from "
      "SLURM_JOB_ID and SLURM_STEP_ID), run id r7 (--rdzv-id), 1 worker per node "
      "(--nproc-per-node)");
  const LaunchConfig no_gpus_said = parse({"t.py"}, without(srunStep(), {"SLURM_GPUS_ON_NODE"}));
  EXPECT_TRUE(describeSlurmLaunch(no_gpus_said, 8, true)
                  .ends_with(", 8 workers per node (visible GPUs; no SLURM_GPUS_ON_NODE)"));
  EXPECT_TRUE(describeSlurmLaunch(no_gpus_said, 1, false)
                  .ends_with(", 1 worker per node (no GPU visible nor SLURM_GPUS_ON_NODE: "
                             "torchrun's default)"));
}

}  // namespace
}  // namespace ddprun::launcher

// The workers' environment, assembled in one place: inherited variables,
// torchrun's defaults only where the user set nothing, the signals torchrun
// exports, and the contract last.
#include "ddprun/launcher/config/worker_environment.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "ddprun/launcher/core/rendezvous.hpp"
#include "launcher_test_util.hpp"

namespace ddprun::launcher {
namespace {

using Vars = std::map<std::string, std::string>;

WorkerGroup group() {
  WorkerGroup group;
  group.attempt = 2;
  group.group_rank = 1;
  group.group_world_size = 2;
  group.base_rank = 4;
  group.world_size = 8;
  group.store_host = "node0";
  group.store_port = 29603;
  return group;
}

Vars workerVars(const WorkerEnvironment& environment, int local_rank = 1) {
  const auto list = environment.forWorker(group(), local_rank, "/logs/error.json");
  return {list.begin(), list.end()};
}

WorkerEnvironment::Job job(int nproc) {
  WorkerEnvironment::Job job;
  job.nproc_per_node = nproc;
  job.max_restarts = 3;
  job.run_id = "job7";
  job.role = "trainer";
  return job;
}

TEST(WorkerEnvironment, TheContractFollowsTheGroupAndRank) {
  const Vars vars = workerVars(WorkerEnvironment(job(4), {}));
  EXPECT_EQ(vars.at("RANK"), "5");
  EXPECT_EQ(vars.at("LOCAL_RANK"), "1");
  EXPECT_EQ(vars.at("GROUP_RANK"), "1");
  EXPECT_EQ(vars.at("ROLE_RANK"), "5");
  EXPECT_EQ(vars.at("ROLE_NAME"), "trainer");
  EXPECT_EQ(vars.at("LOCAL_WORLD_SIZE"), "4");
  EXPECT_EQ(vars.at("WORLD_SIZE"), "8");
  EXPECT_EQ(vars.at("GROUP_WORLD_SIZE"), "2");
  EXPECT_EQ(vars.at("MASTER_ADDR"), "node0");
  EXPECT_EQ(vars.at("MASTER_PORT"), "29603");
  EXPECT_EQ(vars.at("TORCHELASTIC_RESTART_COUNT"), "2");
  EXPECT_EQ(vars.at("TORCHELASTIC_MAX_RESTARTS"), "3");
  EXPECT_EQ(vars.at("TORCHELASTIC_RUN_ID"), "job7");
  EXPECT_EQ(vars.at("TORCHELASTIC_USE_AGENT_STORE"), "True");
  EXPECT_EQ(vars.at("TORCHELASTIC_ERROR_FILE"), "/logs/error.json");
}

// Each worker's own events file for the timeline, per attempt and local
// rank; never an inherited one (an outer launch's worker's file).
TEST(WorkerEnvironment, EachWorkerGetsItsOwnTimelineEventsFileOverAnInheritedOne) {
  const WorkerEnvironment::Variables inherited = {{"DDPRUN_TIMELINE_EVENTS", "/outer/file"}};
  WorkerEnvironment reporting(job(4), inherited);
  reporting.reportTimelineEventsTo("/run/worker_events");
  EXPECT_EQ(workerVars(reporting, 1).at("DDPRUN_TIMELINE_EVENTS"),
            "/run/worker_events/attempt_2.local_rank_1.jsonl");
  EXPECT_EQ(workerVars(reporting, 3).at("DDPRUN_TIMELINE_EVENTS"),
            "/run/worker_events/attempt_2.local_rank_3.jsonl");
  EXPECT_EQ(workerVars(WorkerEnvironment(job(4), inherited)).count("DDPRUN_TIMELINE_EVENTS"), 0u)
      << "no timeline: no file, and not the outer one";
}

TEST(WorkerEnvironment, TorchrunsDefaultsApplyOnlyWhereTheUserSetNothing) {
  WorkerEnvironment defaults(job(4), {{"PATH", "/bin"}});
  Vars vars = workerVars(defaults);
  EXPECT_EQ(vars.at("PATH"), "/bin");
  EXPECT_EQ(vars.at("OMP_NUM_THREADS"), "1");
  EXPECT_EQ(vars.at("TORCH_NCCL_ASYNC_ERROR_HANDLING"), "1");
  ASSERT_EQ(defaults.notices().size(), 1u);
  EXPECT_NE(defaults.notices()[0].find("OMP_NUM_THREADS"), std::string::npos);

  WorkerEnvironment users(job(4),
                          {{"OMP_NUM_THREADS", "8"}, {"TORCH_NCCL_ASYNC_ERROR_HANDLING", "0"}});
  vars = workerVars(users);
  EXPECT_EQ(vars.at("OMP_NUM_THREADS"), "8");
  EXPECT_EQ(vars.at("TORCH_NCCL_ASYNC_ERROR_HANDLING"), "0");
  EXPECT_TRUE(users.notices().empty());

  EXPECT_EQ(workerVars(WorkerEnvironment(job(1), {})).count("OMP_NUM_THREADS"), 0u)
      << "one worker per node needs no OMP_NUM_THREADS";
}

// PyTorch 2.2+ reads TORCH_NCCL_ASYNC_ERROR_HANDLING, 1.13 to 2.1 the older
// name: both are set, unless the user set either, which then stands alone.
TEST(WorkerEnvironment, BothNcclAsyncErrorHandlingNamesUnlessTheUserSetEither) {
  Vars vars = workerVars(WorkerEnvironment(job(2), {}));
  EXPECT_EQ(vars.at("TORCH_NCCL_ASYNC_ERROR_HANDLING"), "1");
  EXPECT_EQ(vars.at("NCCL_ASYNC_ERROR_HANDLING"), "1");

  vars = workerVars(WorkerEnvironment(job(2), {{"NCCL_ASYNC_ERROR_HANDLING", "0"}}));
  EXPECT_EQ(vars.at("NCCL_ASYNC_ERROR_HANDLING"), "0");
  EXPECT_EQ(vars.count("TORCH_NCCL_ASYNC_ERROR_HANDLING"), 0u) << "would override the user's 0";

  vars = workerVars(WorkerEnvironment(job(2), {{"TORCH_NCCL_ASYNC_ERROR_HANDLING", "3"}}));
  EXPECT_EQ(vars.at("TORCH_NCCL_ASYNC_ERROR_HANDLING"), "3");
  EXPECT_EQ(vars.count("NCCL_ASYNC_ERROR_HANDLING"), 0u);

  vars = workerVars(WorkerEnvironment(
      job(2), {{"TORCH_NCCL_ASYNC_ERROR_HANDLING", "2"}, {"NCCL_ASYNC_ERROR_HANDLING", "0"}}));
  EXPECT_EQ(vars.at("TORCH_NCCL_ASYNC_ERROR_HANDLING"), "2");
  EXPECT_EQ(vars.at("NCCL_ASYNC_ERROR_HANDLING"), "0");
}

// Where the workers' torch is known, only the name it reads: 2.2 and later
// warn at start on the old one, 1.13 to 2.1 read only the old one.
TEST(WorkerEnvironment, OnlyTheNcclNameTheWorkersTorchReads) {
  WorkerEnvironment::Job modern = job(2);
  modern.workers_torch = TorchVersion{2, 2};
  Vars vars = workerVars(WorkerEnvironment(modern, {}));
  EXPECT_EQ(vars.at("TORCH_NCCL_ASYNC_ERROR_HANDLING"), "1");
  EXPECT_EQ(vars.count("NCCL_ASYNC_ERROR_HANDLING"), 0u) << "torch 2.2 would warn";

  WorkerEnvironment::Job older = job(2);
  older.workers_torch = TorchVersion{2, 1};
  vars = workerVars(WorkerEnvironment(older, {}));
  EXPECT_EQ(vars.at("NCCL_ASYNC_ERROR_HANDLING"), "1");
  EXPECT_EQ(vars.count("TORCH_NCCL_ASYNC_ERROR_HANDLING"), 0u);

  vars = workerVars(WorkerEnvironment(modern, {{"NCCL_ASYNC_ERROR_HANDLING", "0"}}));
  EXPECT_EQ(vars.at("NCCL_ASYNC_ERROR_HANDLING"), "0") << "the user's, kept as set";
  EXPECT_EQ(vars.count("TORCH_NCCL_ASYNC_ERROR_HANDLING"), 0u);
}

// A hang's forensics are armed unless the user chose: Python's faulthandler
// (the SIGABRT that stops a hung group then prints every Python stack) and
// NCCL's Flight Recorder, dumping into the worker's attempt directory.
TEST(WorkerEnvironment, HangForensicsAreArmedUnlessTheUserChose) {
  Vars vars = workerVars(WorkerEnvironment(job(2), {}));
  EXPECT_EQ(vars.at("PYTHONFAULTHANDLER"), "1");
  EXPECT_EQ(vars.at("TORCH_NCCL_TRACE_BUFFER_SIZE"), "2000");
  EXPECT_EQ(vars.at("TORCH_NCCL_DUMP_ON_TIMEOUT"), "1");
  EXPECT_EQ(vars.at("TORCH_NCCL_DEBUG_INFO_TEMP_FILE"), "/logs/nccl_trace_rank_");

  vars = workerVars(WorkerEnvironment(job(2), {{"PYTHONFAULTHANDLER", ""},
                                               {"TORCH_NCCL_TRACE_BUFFER_SIZE", "0"},
                                               {"TORCH_NCCL_DEBUG_INFO_TEMP_FILE", "/mine/fr_"}}));
  EXPECT_EQ(vars.at("PYTHONFAULTHANDLER"), "") << "the user's choice: off";
  EXPECT_EQ(vars.at("TORCH_NCCL_TRACE_BUFFER_SIZE"), "0");
  EXPECT_EQ(vars.at("TORCH_NCCL_DEBUG_INFO_TEMP_FILE"), "/mine/fr_");

  const auto none = WorkerEnvironment(job(2), {}).forWorker(group(), 0, "");
  EXPECT_EQ(Vars(none.begin(), none.end()).count("TORCH_NCCL_DEBUG_INFO_TEMP_FILE"), 0u)
      << "no attempt directory (--log-dir /dev/null): torch's own default";
}

WorkerEnvironment::Job virtualJob(int nproc) {
  WorkerEnvironment::Job virtual_job = job(nproc);
  virtual_job.virtual_local_rank = true;
  return virtual_job;
}

// --virtual-local-rank as torchrun does it: LOCAL_RANK 0 for all, and each
// worker's CUDA_VISIBLE_DEVICES its own entry of the agent's list (blanks
// around it dropped), or its local rank when the agent has no list.
// A --virtual-local-rank worker of 3 on node 1: local rank 0, its real
// rank, and `device` its only one.
void expectOwnDevice(const Vars& vars, int local_rank, const std::string& device) {
  EXPECT_EQ(vars.at("LOCAL_RANK"), "0");
  EXPECT_EQ(vars.at("RANK"), std::to_string(4 + local_rank)) << "ranks stay real";
  EXPECT_EQ(vars.at("LOCAL_WORLD_SIZE"), "3");
  EXPECT_EQ(vars.at("CUDA_VISIBLE_DEVICES"), device);
}

TEST(WorkerEnvironment, VirtualLocalRankGivesEachWorkerItsOwnDevice) {
  const WorkerEnvironment listed(virtualJob(3), {{"CUDA_VISIBLE_DEVICES", "4, 6,GPU-ab12,7"}});
  const WorkerEnvironment unlisted(virtualJob(3), {{"PATH", "/bin"}});
  const std::vector<std::string> from_list = {"4", "6", "GPU-ab12"};
  for (int local_rank = 0; local_rank < 3; ++local_rank) {
    SCOPED_TRACE(local_rank);
    expectOwnDevice(workerVars(listed, local_rank), local_rank, from_list[local_rank]);
    expectOwnDevice(workerVars(unlisted, local_rank), local_rank, std::to_string(local_rank));
  }
  const Vars plain = workerVars(WorkerEnvironment(job(3), {{"CUDA_VISIBLE_DEVICES", "4,6,7"}}), 2);
  EXPECT_EQ(plain.at("LOCAL_RANK"), "2");
  EXPECT_EQ(plain.at("CUDA_VISIBLE_DEVICES"), "4,6,7") << "without the flag: inherited as is";
}

// The ConfigError a --virtual-local-rank job of `nproc` workers gets for
// `inherited`; "" when it is accepted.
std::string refusal(int nproc, const WorkerEnvironment::Variables& inherited) {
  try {
    const WorkerEnvironment accepted(virtualJob(nproc), inherited);
    return "";
  } catch (const ConfigError& error) {
    return error.what();
  }
}

TEST(WorkerEnvironment, VirtualLocalRankBeyondTheAgentsDevicesIsRefusedBeforeAnyWorker) {
  EXPECT_EQ(refusal(3, {{"CUDA_VISIBLE_DEVICES", "0,1"}}),
            "--virtual-local-rank: local rank 2 has no device of its own: "
            "CUDA_VISIBLE_DEVICES='0,1' lists 2 for 3 workers");
  EXPECT_NE(refusal(1, {{"CUDA_VISIBLE_DEVICES", ""}}), "");
  const LaunchConfig config = testing::parse({"--virtual-local-rank", "t.py"});
  EXPECT_THROW(WorkerEnvironment::forLaunch(config, 2, {{"CUDA_VISIBLE_DEVICES", "5"}}),
               ConfigError);
}

TEST(WorkerEnvironment, TheContractWinsOverInheritedValuesAndTheSignalsAreExported) {
  WorkerEnvironment::Job with_signals = job(2);
  with_signals.signals_to_handle = "SIGTERM,SIGUSR1";
  const Vars vars = workerVars(WorkerEnvironment(
      with_signals,
      {{"RANK", "99"}, {"MASTER_ADDR", "stale"}, {"TORCHELASTIC_SIGNALS_TO_HANDLE", "SIGINT"}}));
  EXPECT_EQ(vars.at("RANK"), "5");
  EXPECT_EQ(vars.at("MASTER_ADDR"), "node0");
  EXPECT_EQ(vars.at("TORCHELASTIC_SIGNALS_TO_HANDLE"), "SIGTERM,SIGUSR1");
}

// The list a worker is started with names each variable once, in name order:
// inherited ones before, between and after the worker's own, an overridden
// one with the worker's value, a dropped one not at all.
TEST(WorkerEnvironment, EachVariableIsListedOnceInNameOrder) {
  WorkerEnvironment environment(job(2), {{"AAA_FIRST", "a"},
                                         {"DDPRUN_TIMELINE_EVENTS", "/outer/file"},
                                         {"LOCAL_RANK", "7"},
                                         {"PATH", "/bin"},
                                         {"zzz_last", "z"}});
  const auto list = environment.forWorker(group(), 1, "/logs/error.json");
  EXPECT_TRUE(std::adjacent_find(list.begin(), list.end(),
                                 [](const auto& a, const auto& b) { return a.first >= b.first; }) ==
              list.end())
      << "a name out of order, or twice";
  const Vars vars(list.begin(), list.end());
  EXPECT_EQ(vars.at("AAA_FIRST"), "a");
  EXPECT_EQ(vars.at("PATH"), "/bin");
  EXPECT_EQ(vars.at("zzz_last"), "z");
  EXPECT_EQ(vars.at("LOCAL_RANK"), "1");
  EXPECT_EQ(vars.count("DDPRUN_TIMELINE_EVENTS"), 0u);
}

// docs/torchrun-contract.md §7.6: the pipe the agent serves reaches every
// worker, over a value it inherited; with no file timer nothing is added.
TEST(WorkerEnvironment, TheFileTimersPipeIsExportedWhenServed) {
  WorkerEnvironment::Job served = job(2);
  served.timer_file = "/tmp/watchdog_timer_x";
  EXPECT_EQ(workerVars(WorkerEnvironment(served, {{"TORCHELASTIC_TIMER_FILE", "/elsewhere"}}))
                .at("TORCHELASTIC_TIMER_FILE"),
            "/tmp/watchdog_timer_x");
  EXPECT_EQ(workerVars(WorkerEnvironment(job(2), {})).count("TORCHELASTIC_TIMER_FILE"), 0u);
  EXPECT_EQ(workerVars(WorkerEnvironment(job(2), {{"TORCHELASTIC_TIMER_FILE", "/elsewhere"}}))
                .at("TORCHELASTIC_TIMER_FILE"),
            "/elsewhere")
      << "inherited as torchrun's workers inherit it";
  const LaunchConfig config = testing::parse({"t.py"}, {{"TORCHELASTIC_ENABLE_FILE_TIMER", "1"},
                                                        {"TORCHELASTIC_TIMER_FILE", "/run/timer"}});
  EXPECT_EQ(workerVars(WorkerEnvironment::forLaunch(config, 2, {})).at("TORCHELASTIC_TIMER_FILE"),
            "/run/timer");
}

// docs/torchrun-contract.md §5.3: the interface a job across hosts needs is
// set where the user set nothing; a user's own value passes through as is.
TEST(WorkerEnvironment, TheSocketInterfaceIsSetOnlyWhereTheUserSetNone) {
  WorkerEnvironment::Job across_hosts = job(2);
  across_hosts.socket_interface = "eth1";
  Vars vars = workerVars(WorkerEnvironment(across_hosts, {}));
  EXPECT_EQ(vars.at("GLOO_SOCKET_IFNAME"), "eth1");
  EXPECT_EQ(vars.at("NCCL_SOCKET_IFNAME"), "=eth1");

  vars = workerVars(WorkerEnvironment(across_hosts, {{"GLOO_SOCKET_IFNAME", "ib0,ib1"}}));
  EXPECT_EQ(vars.at("GLOO_SOCKET_IFNAME"), "ib0,ib1");
  EXPECT_EQ(vars.at("NCCL_SOCKET_IFNAME"), "=eth1");

  vars = workerVars(WorkerEnvironment(across_hosts, {{"NCCL_SOCKET_IFNAME", "^docker"}}));
  EXPECT_EQ(vars.at("GLOO_SOCKET_IFNAME"), "eth1");
  EXPECT_EQ(vars.at("NCCL_SOCKET_IFNAME"), "^docker");

  vars = workerVars(WorkerEnvironment(job(2), {{"GLOO_SOCKET_IFNAME", "ib0"}}));
  EXPECT_EQ(vars.at("GLOO_SOCKET_IFNAME"), "ib0");
  EXPECT_EQ(vars.count("NCCL_SOCKET_IFNAME"), 0u) << "no interface needed: nothing added";
}

TEST(WorkerEnvironment, ForLaunchTakesTheJobFromTheFlags) {
  const LaunchConfig config =
      testing::parse({"--nnodes", "2", "--role", "r", "--rdzv-id", "x", "--max-restarts", "5",
                      "--signals-to-handle", "SIGTERM", "t.py"});
  const Vars vars = workerVars(WorkerEnvironment::forLaunch(config, 3, {}));
  EXPECT_EQ(vars.at("ROLE_NAME"), "r");
  EXPECT_EQ(vars.at("TORCHELASTIC_RUN_ID"), "x");
  EXPECT_EQ(vars.at("TORCHELASTIC_MAX_RESTARTS"), "5");
  EXPECT_EQ(vars.at("LOCAL_WORLD_SIZE"), "3");
  EXPECT_EQ(vars.at("TORCHELASTIC_SIGNALS_TO_HANDLE"), "SIGTERM");
}

}  // namespace
}  // namespace ddprun::launcher

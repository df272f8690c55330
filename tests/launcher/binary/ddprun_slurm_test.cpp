// The ddprun executable's --dry-run and its Slurm awareness, as a user and a
// job script see them: the plan printed with nothing started (no worker, no
// log directory, no rendezvous contacted, no port bound), bad flags still
// refused; under a fake srun environment, the info line and the plan with
// every flag winning on its own, a hand-wired script left alone, the
// refusals in one line; and two srun "tasks" on this host that form one job
// with no rendezvous flag at all.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "ddprun/test_support/eventually.hpp"
#include "ddprun_binary_fixture.hpp"
#include "elastic_fixture.hpp"
#include "srun_step_env.hpp"

namespace ddprun::launcher {
namespace {

using nlohmann::json;
using testing::contains;
using testing::countOf;
using testing::DdprunBinaryTest;
using testing::ElasticTest;
using testing::Outcome;
using Env = std::vector<std::pair<std::string, std::string>>;
using namespace std::chrono_literals;

// A listening socket on 127.0.0.1 at a port the kernel chose: a rendezvous
// endpoint that notices whether anybody connected.
class LoopbackListener {
 public:
  LoopbackListener() {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof(address);
    const auto* any = reinterpret_cast<sockaddr*>(&address);
    EXPECT_EQ(::bind(fd_, any, sizeof(address)), 0);
    EXPECT_EQ(::listen(fd_, 16), 0);
    EXPECT_EQ(::getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &length), 0);
    port_ = ntohs(address.sin_port);
  }
  ~LoopbackListener() { ::close(fd_); }
  LoopbackListener(const LoopbackListener&) = delete;
  LoopbackListener& operator=(const LoopbackListener&) = delete;

  int port() const { return port_; }
  // Whether a connection came (a loopback connect completes in the kernel,
  // even once its process has exited).
  bool wasContacted() const {
    const int connection = ::accept(fd_, nullptr, nullptr);
    if (connection >= 0) {
      ::close(connection);
      return true;
    }
    EXPECT_TRUE(errno == EAGAIN || errno == EWOULDBLOCK) << std::strerror(errno);
    return false;
  }

 private:
  int fd_ = -1;
  int port_ = 0;
};

Env srunStep() { return testing::srunStepVariables(); }

Env with(Env env, const Env& changes) {
  for (const auto& change : changes) {
    std::erase_if(env, [&](const auto& entry) { return entry.first == change.first; });
    env.push_back(change);
  }
  return env;
}

// The text of ddprun's info lines that start with `start`.
std::string infoLine(const std::string& log, const std::string& start) {
  std::istringstream lines(log);
  for (std::string line; std::getline(lines, line);) {
    const auto at = line.find("[info] " + start);
    if (at != std::string::npos) {
      return line.substr(at + 7);
    }
  }
  return "<no info line starting with '" + start + "'>";
}

// The one JSON object --dry-run printed, alone on its line.
json planOf(const Outcome& outcome) {
  EXPECT_EQ(countOf(outcome.stdout_text, "\n"), 1) << outcome.stdout_text;
  return json::parse(outcome.stdout_text);
}

json valued(json value, const std::string& source) {
  return {{"value", std::move(value)}, {"source", source}};
}

TEST_F(DdprunBinaryTest, DryRunPrintsThePlanAndStartsNothing) {
  const LoopbackListener endpoint;
  const auto logs = dir_.path() / "logs";
  const Outcome outcome =
      runFor({"--dry-run", "--nnodes=2", "--nproc-per-node=3", "--rdzv-backend=c10d",
              "--rdzv-endpoint=127.0.0.1:" + std::to_string(endpoint.port()), "--rdzv-id=dry",
              "--max-restarts=2", "--log-dir", logs.string(), "--no-python", DDPRUN_FAKE_WORKER,
              "--env-to", dir_.path().string()},
             20s);
  ASSERT_TRUE(outcome.status.success()) << outcome.status.describe() << outcome.stderr_text;
  const json plan = planOf(outcome);
  EXPECT_EQ(plan["nnodes"], valued({{"min", 2}, {"max", 2}}, "flag"));
  EXPECT_EQ(plan["node_rank"], valued(0, "default"));
  EXPECT_EQ(plan["nproc_per_node"], (json{{"value", 3}, {"asked", "3"}, {"source", "flag"}}));
  EXPECT_EQ(plan["rdzv_backend"], valued("c10d", "flag"));
  EXPECT_EQ(plan["rdzv_endpoint"], valued("127.0.0.1:" + std::to_string(endpoint.port()), "flag"));
  EXPECT_EQ(plan["rdzv_id"], valued("dry", "flag"));
  EXPECT_EQ(plan["max_restarts"], valued(2, "flag"));
  EXPECT_EQ(plan["log_dir"], valued(logs.string(), "flag"));
  EXPECT_EQ(plan["worker_command"],
            valued({DDPRUN_FAKE_WORKER, "--env-to", dir_.path().string()}, "flag"));
  EXPECT_EQ(plan["slurm"], nullptr);
  EXPECT_FALSE(endpoint.wasContacted()) << "a dry run contacts no rendezvous";
  EXPECT_FALSE(std::filesystem::exists(logs)) << "a dry run makes no log directory";
  EXPECT_FALSE(std::filesystem::exists(dir_.path() / "0.env")) << "a dry run starts no worker";
  EXPECT_FALSE(contains(outcome.stderr_text, "process clean-up")) << outcome.stderr_text;
}

// Static node 0 would host the store at the master port, which the test
// holds: a real launch cannot bind it, a dry run does not try.
TEST_F(DdprunBinaryTest, DryRunOfStaticNodeZeroBindsNoPort) {
  const LoopbackListener held;
  const std::string port = std::to_string(held.port());
  const Outcome outcome =
      runFor({"--dry-run", "--nnodes=2", "--node-rank=0", "--master-addr=127.0.0.1",
              "--master-port=" + port, "--no-python", DDPRUN_FAKE_WORKER},
             20s);
  ASSERT_TRUE(outcome.status.success()) << outcome.status.describe() << outcome.stderr_text;
  const json plan = planOf(outcome);
  EXPECT_EQ(plan["rdzv_backend"], valued("static", "default"));
  EXPECT_EQ(plan["rdzv_endpoint"], valued("127.0.0.1:" + port, "derived"));
  EXPECT_EQ(plan["master_port"], valued(held.port(), "flag"));
}

TEST_F(DdprunBinaryTest, DryRunStillRefusesBadFlags) {
  Outcome outcome = run({"--dry-run", "--nnodes=0", "--no-python", DDPRUN_FAKE_WORKER});
  EXPECT_EQ(outcome.status.code, 2);
  EXPECT_EQ(outcome.stderr_text.rfind("ddprun: --nnodes '0': ", 0), 0u) << outcome.stderr_text;
  EXPECT_EQ(outcome.stdout_text, "");
  outcome = run({"--dry-run", "--rdzv-conf=join_timeuot=5", "--no-python", DDPRUN_FAKE_WORKER});
  EXPECT_EQ(outcome.status.code, 2);
  EXPECT_EQ(outcome.stdout_text, "");
}

TEST_F(DdprunBinaryTest, UnderSrunTheInfoLineSaysWhatWasDerivedAndFromWhere) {
  extra_env_ = srunStep();
  const Outcome outcome = runFor({"--dry-run", "--no-python", DDPRUN_FAKE_WORKER}, 20s);
  ASSERT_TRUE(outcome.status.success()) << outcome.stderr_text;
  EXPECT_EQ(infoLine(outcome.stderr_text, "Slurm job"),
            "Slurm job 1234 step 0: 2 nodes (SLURM_STEP_NUM_NODES), node rank 1 (SLURM_NODEID), "
            "c10d rendezvous at gpu001:21234 (first host of SLURM_STEP_NODELIST; port from "
            "SLURM_JOB_ID and SLURM_STEP_ID), run id slurm-1234.0, 4 workers per node "
            "(SLURM_GPUS_ON_NODE)");
  const json plan = planOf(outcome);
  EXPECT_EQ(plan["nnodes"], valued({{"min", 2}, {"max", 2}}, "slurm:SLURM_STEP_NUM_NODES"));
  EXPECT_EQ(plan["node_rank"], valued(1, "slurm:SLURM_NODEID"));
  EXPECT_EQ(plan["rdzv_backend"], valued("c10d", "slurm:SLURM_STEP_NODELIST"));
  EXPECT_EQ(plan["rdzv_endpoint"], valued("gpu001:21234", "slurm:SLURM_STEP_NODELIST"));
  EXPECT_EQ(plan["rdzv_id"], valued("slurm-1234.0", "slurm:SLURM_JOB_ID"));
  EXPECT_EQ(plan["nproc_per_node"],
            (json{{"value", 4}, {"asked", "4"}, {"source", "slurm:SLURM_GPUS_ON_NODE"}}));
  EXPECT_EQ(plan["slurm"],
            (json{{"job_id", "1234"}, {"step_id", "0"}, {"node_list", "gpu[001-002]"}}));
}

TEST_F(DdprunBinaryTest, UnderSrunEachFlagOrPetVariableWinsOnItsOwn) {
  extra_env_ = with(srunStep(), {{"PET_RDZV_ID", "mine"}});
  const Outcome outcome = runFor(
      {"--dry-run", "--nproc-per-node=2", "--nnodes=1:4", "--no-python", DDPRUN_FAKE_WORKER}, 20s);
  ASSERT_TRUE(outcome.status.success()) << outcome.stderr_text;
  EXPECT_EQ(infoLine(outcome.stderr_text, "Slurm job"),
            "Slurm job 1234 step 0: 1:4 nodes (--nnodes), node rank 1 (SLURM_NODEID), c10d "
            "rendezvous at gpu001:21234 (first host of SLURM_STEP_NODELIST; port from "
            "SLURM_JOB_ID and SLURM_STEP_ID), run id mine (PET_RDZV_ID), 2 workers per node "
            "(--nproc-per-node)");
  const json plan = planOf(outcome);
  EXPECT_EQ(plan["nnodes"], valued({{"min", 1}, {"max", 4}}, "flag"));
  EXPECT_EQ(plan["nproc_per_node"], (json{{"value", 2}, {"asked", "2"}, {"source", "flag"}}));
  EXPECT_EQ(plan["rdzv_id"], valued("mine", "env:PET_RDZV_ID"));
  EXPECT_EQ(plan["rdzv_endpoint"], valued("gpu001:21234", "slurm:SLURM_STEP_NODELIST"));
  EXPECT_EQ(plan["node_rank"], valued(1, "slurm:SLURM_NODEID"));
}

TEST_F(DdprunBinaryTest, UnderSrunWithoutGpusOnNodeTheVisibleGpusElseOneWorker) {
  extra_env_ = srunStep();
  std::erase_if(extra_env_, [](const auto& entry) { return entry.first == "SLURM_GPUS_ON_NODE"; });
  const Outcome outcome = runFor({"--dry-run", "--no-python", DDPRUN_FAKE_WORKER}, 20s);
  ASSERT_TRUE(outcome.status.success()) << outcome.stderr_text;
  // The agent counts GPUs as this test does (a GPU machine sees them).
  const int gpus = testing::gpusVisibleHere().count;
  const std::string workers =
      gpus > 0 ? std::to_string(gpus) + (gpus == 1 ? " worker" : " workers") +
                     " per node (visible GPUs; no SLURM_GPUS_ON_NODE)"
               : "1 worker per node (no GPU visible nor SLURM_GPUS_ON_NODE: torchrun's default)";
  EXPECT_TRUE(infoLine(outcome.stderr_text, "Slurm job").ends_with(", " + workers))
      << outcome.stderr_text;
  EXPECT_EQ(planOf(outcome)["nproc_per_node"],
            (json{{"value", std::max(gpus, 1)}, {"asked", "gpu, else 1"}, {"source", "derived"}}));
}

// A torchrun-style sbatch script's line, run under srun: as without Slurm.
TEST_F(DdprunBinaryTest, AHandWiredRendezvousUnderSrunIsLaunchedAsWithoutSlurm) {
  const std::vector<std::string> args = {
      "--dry-run",           "--nnodes=2",         "--node-rank=1", "--master-addr=node0",
      "--master-port=29511", "--nproc-per-node=2", "--no-python",   DDPRUN_FAKE_WORKER};
  const Outcome plain = runFor(args, 20s);
  ASSERT_TRUE(plain.status.success()) << plain.stderr_text;
  extra_env_ = with(srunStep(), {{"SLURM_STEP_TASKS_PER_NODE", "2(x2)"}});  // not even read
  const Outcome under_srun = runFor(args, 20s);
  ASSERT_TRUE(under_srun.status.success()) << under_srun.stderr_text;
  EXPECT_EQ(under_srun.stdout_text, plain.stdout_text);
  EXPECT_FALSE(contains(under_srun.stderr_text, "Slurm")) << under_srun.stderr_text;
  EXPECT_EQ(planOf(under_srun)["rdzv_endpoint"], valued("node0:29511", "derived"));
}

TEST_F(DdprunBinaryTest, NoSlurmLaunchesAsWithoutSlurm) {
  const auto planWithoutRunId = [this](const std::vector<std::string>& args) {
    const Outcome outcome = runFor(args, 20s);
    EXPECT_TRUE(outcome.status.success()) << outcome.stderr_text;
    EXPECT_FALSE(contains(outcome.stderr_text, "Slurm")) << outcome.stderr_text;
    json plan = planOf(outcome);
    plan.erase("rdzv_id");  // --standalone's is a fresh UUID each time
    return plan;
  };
  const json plain = planWithoutRunId({"--dry-run", "--no-python", DDPRUN_FAKE_WORKER});
  extra_env_ = srunStep();
  EXPECT_EQ(planWithoutRunId({"--dry-run", "--no-slurm", "--no-python", DDPRUN_FAKE_WORKER}),
            plain);
}

TEST_F(DdprunBinaryTest, SeveralTasksPerNodeAreRefusedInOneLine) {
  extra_env_ =
      with(srunStep(), {{"SLURM_STEP_TASKS_PER_NODE", "4(x2)"}, {"SLURM_STEP_NUM_TASKS", "8"}});
  const Outcome outcome = run({"--dry-run", "--no-python", DDPRUN_FAKE_WORKER});
  EXPECT_EQ(outcome.status.code, 2);
  EXPECT_EQ(outcome.stderr_text,
            "ddprun: Slurm step 1234.0 runs 4 tasks on a node (SLURM_STEP_TASKS_PER_NODE=4(x2)), "
            "but ddprun starts every worker of its node itself and needs one task per node: "
            "launch it with `srun --ntasks-per-node=1 ddprun ...` (or --no-slurm and a "
            "rendezvous of your own)\n");
  EXPECT_EQ(outcome.stdout_text, "");
}

TEST_F(DdprunBinaryTest, ABadStepNodeListIsOneLineNamingIt) {
  extra_env_ = with(srunStep(), {{"SLURM_STEP_NODELIST", "gpu[002-001]"}});
  const Outcome outcome = run({"--dry-run", "--no-python", DDPRUN_FAKE_WORKER});
  EXPECT_EQ(outcome.status.code, 2);
  EXPECT_EQ(outcome.stderr_text,
            "ddprun: SLURM_STEP_NODELIST 'gpu[002-001]': the range 002-001 is reversed\n");
}

TEST_F(DdprunBinaryTest, DdprunInABatchScriptOfSeveralNodesIsWarnedItRunsHereOnly) {
  extra_env_ = {
      {"SLURM_JOB_ID", "77"}, {"SLURM_JOB_NODELIST", "n[1-2]"}, {"SLURM_JOB_NUM_NODES", "2"}};
  const Outcome outcome = runFor({"--dry-run", "--no-python", DDPRUN_FAKE_WORKER}, 20s);
  ASSERT_TRUE(outcome.status.success()) << outcome.stderr_text;
  EXPECT_TRUE(contains(outcome.stderr_text,
                       "[warning] Slurm job 77 has 2 nodes (SLURM_JOB_NUM_NODES), but this ddprun "
                       "was not started by srun (no SLURM_STEP_NODELIST), so it launches on this "
                       "node only"))
      << outcome.stderr_text;
  EXPECT_EQ(planOf(outcome)["nnodes"], valued({{"min", 1}, {"max", 1}}, "default"));
}

// A job id whose derived port (20000 + id % 10000) was free on 127.0.0.1 a
// moment ago: the port follows from the job id by design, so the test picks
// the id. (Like freeLoopbackPort, another process may take it meanwhile.)
std::string jobIdWithAFreePort() {
  std::mt19937 random(std::random_device{}());
  for (int attempt = 0; attempt < 200; ++attempt) {
    const int job_id = 10000 + static_cast<int>(random() % 10000);
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = htons(static_cast<std::uint16_t>(20000 + job_id % 10000));
    const bool free = ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0;
    ::close(fd);
    if (free) {
      return std::to_string(job_id);
    }
  }
  ADD_FAILURE() << "no free port in 20000-29999 on 127.0.0.1";
  return "0";
}

// `srun -N2 ddprun --no-python fake_worker` on two "nodes" that are this
// host: no rendezvous flag, one job of four ranks, the node ranks
// SLURM_NODEID gave, the run id from the job and step.
// What srun gives the task of node `node_id` of a two-node step on this host.
Env loopbackStep(const std::string& job_id, const std::string& node_id) {
  return {{"SLURM_JOB_ID", job_id},
          {"SLURM_STEP_ID", "0"},
          {"SLURM_STEP_NODELIST", "127.0.0.1,127.0.0.1"},
          {"SLURM_STEP_NUM_NODES", "2"},
          {"SLURM_STEP_NUM_TASKS", "2"},
          {"SLURM_STEP_TASKS_PER_NODE", "1(x2)"},
          {"SLURM_NODEID", node_id},
          {"SLURM_GPUS_ON_NODE", "2"}};
}

TEST_F(ElasticTest, TwoSrunTasksFormOneJobWithNoRendezvousFlag) {
  const std::string job_id = jobIdWithAFreePort();
  const auto task = [&](const std::string& name, const std::string& node_id) {
    const std::string dir = (dir_.path() / name).string();
    return launch(name, {"--no-python", DDPRUN_FAKE_WORKER, "--env-to", dir},
                  loopbackStep(job_id, node_id));
  };
  Subprocess second = task("second", "1");  // the node that does not host starts first
  Subprocess first = task("first", "0");
  for (const auto& [agent, name] : {std::pair<Subprocess*, std::string>{&first, "first"},
                                    std::pair<Subprocess*, std::string>{&second, "second"}}) {
    const auto status = agent->waitFor(60s);
    ASSERT_TRUE(status && status->success())
        << name << ": " << (status ? status->describe() : "still running") << "\n=== first ===\n"
        << log("first") << "\n=== second ===\n"
        << log("second");  // both: the other agent is often the one that went wrong
  }
  const std::string port = std::to_string(20000 + std::stoi(job_id) % 10000);
  EXPECT_TRUE(contains(log("first"), "Slurm job " + job_id +
                                         " step 0: 2 nodes "
                                         "(SLURM_STEP_NUM_NODES), node rank 0 (SLURM_NODEID), c10d "
                                         "rendezvous at 127.0.0.1:" +
                                         port))
      << log("first");
  for (const auto& [name, base_rank] : {std::pair{"first", 0}, std::pair{"second", 2}}) {
    for (int local_rank : {0, 1}) {
      SCOPED_TRACE(std::string(name) + " " + std::to_string(local_rank));
      auto variables = env(name, local_rank);
      EXPECT_EQ(variables["RANK"], std::to_string(base_rank + local_rank));
      EXPECT_EQ(variables["WORLD_SIZE"], "4");
      EXPECT_EQ(variables["TORCHELASTIC_RUN_ID"], "slurm-" + job_id + ".0");
    }
  }
}

// Jobs 10000 apart derive one port: the second job's first node finds the
// first job's agent hosting it. Its join is refused in one line naming both
// runs, within seconds: the jobs never merge, and it does not wait out
// join_timeout for a second node that can only join the wrong rendezvous.
TEST_F(ElasticTest, AJobWhoseDerivedPortIsTakenByAnotherJobIsToldSoAtOnce) {
  const std::string job_id = jobIdWithAFreePort();
  const std::string clashing_id = std::to_string(std::stoi(job_id) + 10000);
  Subprocess first =
      launch("first", {"--no-python", DDPRUN_FAKE_WORKER}, loopbackStep(job_id, "0"));
  ASSERT_TRUE(test_support::eventually(
      [&] { return contains(log("first"), "hosting the rendezvous"); }, 20s))
      << log("first");
  Subprocess second =
      launch("second", {"--no-python", DDPRUN_FAKE_WORKER}, loopbackStep(clashing_id, "0"));
  const auto status = second.waitFor(20s);
  ASSERT_TRUE(status) << "still waiting after 20 s:\n" << log("second");
  EXPECT_EQ(status->shellCode(), 1) << log("second");
  EXPECT_TRUE(
      contains(log("second"),
               "this endpoint is the rendezvous of another job (run 'slurm-" + job_id + ".0'"))
      << log("second");
  EXPECT_EQ(countOf(log("second"), "another job"), 1) << log("second");
  // The hosting agent says so too, and its own job is untouched.
  EXPECT_TRUE(contains(log("first"), "a join of rendezvous 'slurm-" + clashing_id +
                                         ".0' at the rendezvous of run 'slurm-" + job_id +
                                         ".0' only; refused"))
      << log("first");
}

}  // namespace
}  // namespace ddprun::launcher

// The agent with real worker processes (fake_worker): the environment
// contract, success, a failing rank stopping the group, restarts, exit codes
// for codes and signals, grace then SIGKILL, and signal forwarding.
#include "ddprun/launcher/agent.hpp"

#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <future>
#include <map>

#include "ddprun/test_support/eventually.hpp"
#include "ddprun/test_support/files.hpp"
#include "ddprun/test_support/temp_dir.hpp"

namespace ddprun::launcher {
namespace {

using namespace std::chrono_literals;

AgentConfig configFor(int nproc, std::vector<std::string> worker_args) {
  AgentConfig config;
  config.nproc_per_node = nproc;
  config.shutdown_timeout = 5s;
  config.group.world_size = nproc;
  config.group.local_world_size = nproc;
  config.group.role_world_size = nproc;
  config.group.master_addr = "127.0.0.1";
  config.group.master_port = 29999;
  config.group.run_id = "test-run";
  config.group.use_agent_store = true;
  config.command = [worker_args](int) {
    std::vector<std::string> argv = {DDPRUN_FAKE_WORKER};
    argv.insert(argv.end(), worker_args.begin(), worker_args.end());
    return argv;
  };
  config.base_env = {{"PATH", "/usr/bin:/bin"}, {"INHERITED", "yes"}};
  return config;
}

using test_support::readEnvFile;

TEST(AgentTest, EveryWorkerGetsTheContractAndSuccessIsExitZero) {
  test_support::TempDir dir;
  AgentConfig config = configFor(3, {"--env-to", dir.path().string()});
  config.max_restarts = 2;
  const RunResult result = Agent(config).run();
  EXPECT_EQ(result.exit_code, 0);
  EXPECT_EQ(result.attempts, 1);
  EXPECT_TRUE(result.failures.empty());
  for (int local_rank = 0; local_rank < 3; ++local_rank) {
    auto vars = readEnvFile(dir.path() / (std::to_string(local_rank) + ".env"));
    EXPECT_EQ(vars["RANK"], std::to_string(local_rank));
    EXPECT_EQ(vars["LOCAL_RANK"], std::to_string(local_rank));
    EXPECT_EQ(vars["WORLD_SIZE"], "3");
    EXPECT_EQ(vars["LOCAL_WORLD_SIZE"], "3");
    EXPECT_EQ(vars["MASTER_PORT"], "29999");
    EXPECT_EQ(vars["TORCHELASTIC_RESTART_COUNT"], "0");
    EXPECT_EQ(vars["TORCHELASTIC_MAX_RESTARTS"], "2");
    EXPECT_EQ(vars["TORCHELASTIC_RUN_ID"], "test-run");
    EXPECT_EQ(vars["TORCHELASTIC_USE_AGENT_STORE"], "True");
  }
}

TEST(AgentTest, AFailingRankStopsTheOthersAndItsCodeIsTheExitStatus) {
  // Rank 1 exits 3 while ranks 0 and 2 would hang forever.
  AgentConfig config = configFor(3, {"--only-rank", "1", "--exit", "3"});
  config.command = [](int local_rank) {
    std::vector<std::string> argv = {DDPRUN_FAKE_WORKER};
    if (local_rank == 1) {
      argv.insert(argv.end(), {"--exit", "3"});
    } else {
      argv.push_back("--hang");
    }
    return argv;
  };
  const auto started = std::chrono::steady_clock::now();
  const RunResult result = Agent(config).run();
  EXPECT_LT(std::chrono::steady_clock::now() - started, 4s) << "waited for the grace period";
  EXPECT_EQ(result.exit_code, 3);
  ASSERT_EQ(result.failures.size(), 1u);  // the others were stopped by us, not failures
  EXPECT_EQ(result.failures.front().rank, 1);
  const std::string report = formatFailureReport(result, "host0", "train");
  EXPECT_NE(report.find("rank      : 1 (local_rank: 1)"), std::string::npos) << report;
  EXPECT_NE(report.find("exitcode  : 3"), std::string::npos) << report;
}

TEST(AgentTest, WorkerKilledBySignalGivesOneTwentyEightPlusSignal) {
  const RunResult result =
      Agent(configFor(2, {"--only-rank", "0", "--signal", std::to_string(SIGSEGV)})).run();
  EXPECT_EQ(result.exit_code, 128 + SIGSEGV);
  ASSERT_FALSE(result.failures.empty());
  EXPECT_EQ(result.failures.front().status.describe(), "killed by SIGSEGV (signal 11)");
}

TEST(AgentTest, RestartedGroupSucceedsWithTheNextRestartCount) {
  test_support::TempDir dir;
  AgentConfig config = configFor(2, {"--env-to", dir.path().string(), "--only-rank", "1",
                                     "--only-attempt", "0", "--exit", "1"});
  config.max_restarts = 1;
  std::vector<int> attempts_started;
  config.before_attempt = [&](int attempt) { attempts_started.push_back(attempt); };
  const RunResult result = Agent(config).run();
  EXPECT_EQ(result.exit_code, 0);
  EXPECT_EQ(result.attempts, 2);
  EXPECT_EQ(attempts_started, (std::vector<int>{0, 1}));
  EXPECT_EQ(readEnvFile(dir.path() / "1.env")["TORCHELASTIC_RESTART_COUNT"], "1");
}

TEST(AgentTest, RestartsAreBoundedByMaxRestarts) {
  AgentConfig config = configFor(2, {"--only-rank", "0", "--exit", "5"});
  config.max_restarts = 2;
  const RunResult result = Agent(config).run();
  EXPECT_EQ(result.exit_code, 5);
  EXPECT_EQ(result.attempts, 3);
}

TEST(AgentTest, WorkerIgnoringSigtermIsKilledAfterTheShutdownTimeout) {
  test_support::TempDir dir;
  AgentConfig config = configFor(2, {});
  config.shutdown_timeout = 300ms;
  // Rank 0 fails only once rank 1 has started ignoring SIGTERM.
  config.command = [&dir](int local_rank) {
    return local_rank == 0
               ? std::vector<std::string>{DDPRUN_FAKE_WORKER, "--after",
                                          (dir.path() / "1.ready").string(), "--exit", "2"}
               : std::vector<std::string>{DDPRUN_FAKE_WORKER, "--ignore-term", "--ready-to",
                                          dir.path().string()};
  };
  const auto started = std::chrono::steady_clock::now();
  const RunResult result = Agent(config).run();
  const auto took = std::chrono::steady_clock::now() - started;
  EXPECT_EQ(result.exit_code, 2);
  ASSERT_FALSE(result.failures.empty());
  EXPECT_GE(std::chrono::steady_clock::now() - result.failures.front().monotonic, 300ms)
      << "the SIGTERM-ignoring worker ended before the shutdown timeout";
  EXPECT_LT(took, 5s);
}

TEST(AgentTest, HandledSignalIsForwardedAndEndsTheRun) {
  test_support::TempDir dir;
  AgentConfig config = configFor(2, {"--ready-to", dir.path().string(), "--hang"});
  config.signals_to_handle = {SIGTERM};
  config.max_restarts = 3;  // a signal never restarts
  auto run = std::async(std::launch::async, [&] { return Agent(config).run(); });
  ASSERT_TRUE(test_support::eventually(
      [&] {
        return std::filesystem::exists(dir.path() / "0.ready") &&
               std::filesystem::exists(dir.path() / "1.ready");
      },
      10s));
  ASSERT_EQ(kill(getpid(), SIGTERM), 0);
  ASSERT_EQ(run.wait_for(10s), std::future_status::ready);
  const RunResult result = run.get();
  EXPECT_EQ(result.exit_code, 128 + SIGTERM);
  EXPECT_EQ(result.signal, SIGTERM);
  EXPECT_EQ(result.attempts, 1);
}

}  // namespace
}  // namespace ddprun::launcher

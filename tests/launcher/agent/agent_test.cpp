// The agent with real worker processes (fake_worker) and a scripted
// rendezvous (FakeRendezvous): the environment contract, success, a failing
// rank stopping the group, counted restarts, exit codes for codes and
// signals, grace then SIGKILL, a SIGKILL the agent did not send counted as a
// failure while the group stops, signal forwarding; and what the rendezvous
// drives: groups it decides, membership restarts that do not count, the job
// ended elsewhere, its errors, a worker that cannot be spawned, and a signal
// while the agent waits for a group.
#include "ddprun/launcher/agent/agent.hpp"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <map>

#include "ddprun/test_support/eventually.hpp"
#include "ddprun/test_support/files.hpp"
#include "ddprun/test_support/temp_dir.hpp"
#include "fake_rendezvous.hpp"
#include "fake_worker_config.hpp"
#include "leftovers.hpp"

namespace ddprun::launcher {
namespace {

using namespace std::chrono_literals;
using test_support::readEnvFile;
using testing::FakeRendezvous;
using testing::singleNode;

AgentConfig configFor(Rendezvous& rendezvous, int nproc, std::vector<std::string> worker_args,
                      int max_restarts = 0) {
  WorkerEnvironment::Job job;
  job.run_id = "test-run";
  return testing::fakeWorkerConfig(rendezvous, nproc, std::move(worker_args), max_restarts, job,
                                   {{"PATH", "/usr/bin:/bin"}, {"INHERITED", "yes"}});
}

bool readyFiles(const test_support::TempDir& dir, int nproc) {
  for (int local_rank = 0; local_rank < nproc; ++local_rank) {
    if (!std::filesystem::exists(dir.path() / (std::to_string(local_rank) + ".ready"))) {
      return false;
    }
  }
  return true;
}

TEST(AgentTest, EveryWorkerGetsTheContractAndSuccessIsExitZero) {
  test_support::TempDir dir;
  FakeRendezvous rendezvous(singleNode(3));
  const RunResult result =
      Agent(configFor(rendezvous, 3, {"--env-to", dir.path().string()}, 2)).run();
  EXPECT_EQ(result.exit_code, 0);
  EXPECT_EQ(result.attempts, 1);
  EXPECT_TRUE(result.failures.empty());
  EXPECT_TRUE(result.error.empty()) << result.error;
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
  FakeRendezvous rendezvous(singleNode(3));
  AgentConfig config = configFor(rendezvous, 3, {});
  // Rank 1 exits 3 while ranks 0 and 2 would hang forever.
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
  FakeRendezvous rendezvous(singleNode(2));
  const RunResult result =
      Agent(configFor(rendezvous, 2, {"--only-rank", "0", "--signal", std::to_string(SIGSEGV)}))
          .run();
  EXPECT_EQ(result.exit_code, 128 + SIGSEGV);
  ASSERT_FALSE(result.failures.empty());
  EXPECT_EQ(result.failures.front().status.describe(), "killed by SIGSEGV (signal 11)");
}

// A failure with restarts left asks the rendezvous for a restart and for the
// next group, whose attempt number the workers see.
TEST(AgentTest, ACountedRestartAsksTheRendezvousForTheNextGroup) {
  test_support::TempDir dir;
  FakeRendezvous rendezvous(singleNode(2));
  const RunResult result = Agent(configFor(rendezvous, 2,
                                           {"--env-to", dir.path().string(), "--only-rank", "1",
                                            "--only-attempt", "0", "--exit", "1"},
                                           1))
                               .run();
  EXPECT_EQ(result.exit_code, 0);
  EXPECT_EQ(result.attempts, 2);
  EXPECT_EQ(rendezvous.calls(), 2);
  EXPECT_EQ(rendezvous.restartRequests(), 1);
  EXPECT_EQ(readEnvFile(dir.path() / "1.env")["TORCHELASTIC_RESTART_COUNT"], "1");
  // The request names the failure that started it (`ddprun status` shows it).
  const auto causes = rendezvous.restartCauses();
  ASSERT_EQ(causes.size(), 1u);
  EXPECT_EQ(causes[0].attempt, 0);
  EXPECT_EQ(causes[0].rank, 1);
  EXPECT_EQ(causes[0].local_rank, 1);
  EXPECT_EQ(causes[0].status.describe(), "exited with code 1");
  EXPECT_GT(causes[0].pid, 0);
}

TEST(AgentTest, RestartsAreBoundedByMaxRestarts) {
  FakeRendezvous rendezvous(singleNode(2));
  const RunResult result =
      Agent(configFor(rendezvous, 2, {"--only-rank", "0", "--exit", "5"}, 2)).run();
  EXPECT_EQ(result.exit_code, 5);
  EXPECT_EQ(result.attempts, 3);
  EXPECT_EQ(rendezvous.restartRequests(), 2) << "the last failure asks for no restart";
}

// Nothing a worker started outlives the run: the rest of a failed worker's
// process group (the agent stopped signalling it once the worker was reaped),
// nor what left its group (setsid, a daemon).
TEST(AgentTest, NothingTheWorkersStartedOutlivesTheRun) {
  test_support::TempDir dir;
  FakeRendezvous rendezvous(singleNode(2));
  // Rank 1 fails once both have started theirs.
  const RunResult result =
      Agent(configFor(
                rendezvous, 2,
                {"--leak", dir.path().string(), "--after", (dir.path() / "leak.0.0").string(),
                 "--after", (dir.path() / "leak.0.1").string(), "--only-rank", "1", "--exit", "3"}))
          .run();
  EXPECT_EQ(result.exit_code, 3);
  std::vector<testing::Leftover> leftovers;
  for (const char* rank : {"0", "1"}) {
    const auto file = dir.path() / (std::string("leak.0.") + rank);
    ASSERT_TRUE(std::filesystem::exists(file)) << file;
    for (const auto& leftover : testing::readLeftovers(file)) {
      leftovers.push_back(leftover);
    }
  }
  EXPECT_TRUE(testing::noneAlive(leftovers))
      << "alive after run() returned: " << testing::describeAlive(leftovers);
  testing::killAlive(leftovers);
}

// Two workers: rank 1 ignores SIGTERM (then does what `rank_one_then`
// says), and rank 0 exits 2 once rank 1 is ready under `dir`.
std::function<std::vector<std::string>(int)> rankZeroFailsOnceRankOneIgnoresSigterm(
    const std::filesystem::path& dir, std::vector<std::string> rank_one_then) {
  return [dir, rank_one_then = std::move(rank_one_then)](int local_rank) {
    if (local_rank == 0) {
      return std::vector<std::string>{DDPRUN_FAKE_WORKER, "--after", (dir / "1.ready").string(),
                                      "--exit", "2"};
    }
    std::vector<std::string> argv = {DDPRUN_FAKE_WORKER, "--ignore-term", "--ready-to",
                                     dir.string()};
    argv.insert(argv.end(), rank_one_then.begin(), rank_one_then.end());
    return argv;
  };
}

TEST(AgentTest, WorkerIgnoringSigtermIsKilledAfterTheShutdownTimeout) {
  test_support::TempDir dir;
  FakeRendezvous rendezvous(singleNode(2));
  AgentConfig config = configFor(rendezvous, 2, {});
  config.shutdown_timeout = 300ms;
  // Rank 0 fails only once rank 1 has started ignoring SIGTERM.
  config.command = rankZeroFailsOnceRankOneIgnoresSigterm(dir.path(), {});
  const auto started = std::chrono::steady_clock::now();
  const RunResult result = Agent(config).run();
  const auto took = std::chrono::steady_clock::now() - started;
  EXPECT_EQ(result.exit_code, 2);
  ASSERT_FALSE(result.failures.empty());
  EXPECT_GE(std::chrono::steady_clock::now() - result.failures.front().monotonic, 300ms)
      << "the SIGTERM-ignoring worker ended before the shutdown timeout";
  EXPECT_LT(took, 5s);
}

// While the group stops for rank 0's failure, rank 1 (which ignores the
// SIGTERM it was sent) dies of a SIGKILL the agent never sent: its own, as a
// worker's fault injection or the OOM killer's would be. That is a failure
// too, listed after the one seen first; it used to count as stopped by the
// agent, so the report lost the rank that was killed.
TEST(AgentTest, ASigkillTheAgentDidNotSendIsAFailureEvenWhileTheGroupStops) {
  test_support::TempDir dir;
  FakeRendezvous rendezvous(singleNode(2));
  AgentConfig config = configFor(rendezvous, 2, {});
  config.shutdown_timeout = 30s;
  config.command = rankZeroFailsOnceRankOneIgnoresSigterm(
      dir.path(), {"--spin", "1000", "--signal", std::to_string(SIGKILL)});
  const auto started = std::chrono::steady_clock::now();
  const RunResult result = Agent(config).run();
  EXPECT_LT(std::chrono::steady_clock::now() - started, 20s) << "waited for the grace period";
  EXPECT_EQ(result.exit_code, 2);
  ASSERT_EQ(result.failures.size(), 2u);
  EXPECT_EQ(result.failures[0].rank, 0);
  EXPECT_EQ(result.failures[0].status.describe(), "exited with code 2");
  EXPECT_EQ(result.failures[1].rank, 1);
  EXPECT_EQ(result.failures[1].status.describe(), "killed by SIGKILL (signal 9)");
}

TEST(AgentTest, HandledSignalIsForwardedAndEndsTheRun) {
  test_support::TempDir dir;
  FakeRendezvous rendezvous(singleNode(2));
  AgentConfig config = configFor(rendezvous, 2, {"--ready-to", dir.path().string(), "--hang"}, 3);
  config.signals_to_handle = {SIGTERM};
  auto run = std::async(std::launch::async, [&] { return Agent(config).run(); });
  ASSERT_TRUE(test_support::eventually([&] { return readyFiles(dir, 2); }, 10s));
  ASSERT_EQ(kill(getpid(), SIGTERM), 0);
  ASSERT_EQ(run.wait_for(10s), std::future_status::ready);
  const RunResult result = run.get();
  EXPECT_EQ(result.exit_code, 128 + SIGTERM);
  EXPECT_EQ(result.signal, SIGTERM);
  EXPECT_EQ(result.attempts, 1);  // a signal never restarts
}

// SIGUSR1 and SIGUSR2 are not stop requests (agent.hpp): each running worker
// gets them and the run goes on to its own end.
TEST(AgentTest, Usr1AndUsr2AreForwardedAndTheWorkersKeepRunning) {
  test_support::TempDir dir;
  const std::filesystem::path script = dir.path() / "counting.sh";
  const std::string where = dir.path().string();
  std::ofstream(script) << "trap 'echo . >> \"" << where << "/$LOCAL_RANK.usr1\"' USR1\n"
                        << "trap 'echo . >> \"" << where << "/$LOCAL_RANK.usr2\"' USR2\n"
                        << "touch \"" << where << "/$LOCAL_RANK.ready\"\n"
                        << "while [ ! -e \"" << where << "/finish\" ]; do sleep 0.05; done\n";
  FakeRendezvous rendezvous(singleNode(2));
  AgentConfig config = configFor(rendezvous, 2, {});
  config.signals_to_handle = {SIGTERM};
  config.command = [&script](int) { return std::vector<std::string>{"/bin/sh", script.string()}; };
  auto run = std::async(std::launch::async, [&] { return Agent(config).run(); });
  ASSERT_TRUE(test_support::eventually([&] { return readyFiles(dir, 2); }, 10s));
  const auto lines = [&](const std::string& name) {
    const std::string text = test_support::readFile(dir.path() / name);
    return std::count(text.begin(), text.end(), '\n');
  };
  for (const int signal : {SIGUSR1, SIGUSR2}) {
    const std::string suffix = signal == SIGUSR1 ? ".usr1" : ".usr2";
    ASSERT_EQ(kill(getpid(), signal), 0);
    EXPECT_TRUE(test_support::eventually(
        [&] { return lines("0" + suffix) == 1 && lines("1" + suffix) == 1; }, 10s))
        << suffix;
  }
  EXPECT_EQ(run.wait_for(100ms), std::future_status::timeout) << "a warning signal ended the run";
  std::ofstream(dir.path() / "finish") << "now\n";
  ASSERT_EQ(run.wait_for(10s), std::future_status::ready);
  const RunResult result = run.get();
  EXPECT_EQ(result.exit_code, 0);
  EXPECT_EQ(result.signal, 0);
  EXPECT_TRUE(result.failures.empty());
}

// Named in --signals-to-handle, SIGUSR1 or SIGUSR2 is a stop request again, as in
// torchrun, and no longer only forwarded.
TEST(AgentTest, OnlyUnhandledUsr1AndUsr2AreForwardedOnly) {
  EXPECT_EQ(forwardedOnlySignals({SIGTERM}), (std::vector<int>{SIGUSR1, SIGUSR2}));
  EXPECT_EQ(forwardedOnlySignals({SIGTERM, SIGUSR1}), (std::vector<int>{SIGUSR2}));
  EXPECT_TRUE(forwardedOnlySignals({SIGUSR2, SIGUSR1}).empty());
}

// The rendezvous decides the group: ranks, world, store, attempt number.
TEST(AgentTest, TheWorkersRunTheGroupTheRendezvousDecided) {
  test_support::TempDir dir;
  FakeRendezvous rendezvous;
  WorkerGroup group;
  group.attempt = 4;
  group.group_rank = 1;
  group.group_world_size = 3;
  group.base_rank = 2;
  group.world_size = 6;
  group.store_host = "10.1.2.3";
  group.store_port = 4242;
  rendezvous.push(group);
  const RunResult result = Agent(configFor(rendezvous, 2, {"--env-to", dir.path().string()})).run();
  EXPECT_EQ(result.exit_code, 0);
  auto vars = readEnvFile(dir.path() / "1.env");
  EXPECT_EQ(vars["RANK"], "3");
  EXPECT_EQ(vars["GROUP_RANK"], "1");
  EXPECT_EQ(vars["GROUP_WORLD_SIZE"], "3");
  EXPECT_EQ(vars["WORLD_SIZE"], "6");
  EXPECT_EQ(vars["TORCHELASTIC_RESTART_COUNT"], "4");
  EXPECT_EQ(vars["MASTER_ADDR"], "10.1.2.3");
  EXPECT_EQ(vars["MASTER_PORT"], "4242");
}

// A membership change ends the running group: its workers are stopped and
// the next group runs, with no restart counted (max_restarts is 0).
TEST(AgentTest, AMembershipChangeRestartsTheWorkersWithoutCounting) {
  test_support::TempDir dir;
  FakeRendezvous rendezvous;
  rendezvous.push(singleNode(2));
  auto run = std::async(std::launch::async, [&] {
    return Agent(configFor(rendezvous, 2,
                           {"--env-to", dir.path().string(), "--ready-to", dir.path().string(),
                            "--hang", "--only-attempt", "0"}))
        .run();
  });
  ASSERT_TRUE(test_support::eventually([&] { return readyFiles(dir, 2); }, 10s));
  WorkerGroup next = singleNode(2);
  next.attempt = 1;
  rendezvous.push(next);
  rendezvous.declareOver(1);
  ASSERT_EQ(run.wait_for(10s), std::future_status::ready);
  const RunResult result = run.get();
  EXPECT_EQ(result.exit_code, 0);
  EXPECT_EQ(result.attempts, 2);
  EXPECT_TRUE(result.failures.empty());
  EXPECT_EQ(rendezvous.restartRequests(), 0);
  EXPECT_EQ(readEnvFile(dir.path() / "0.env")["TORCHELASTIC_RESTART_COUNT"], "1");
}

// Every worker failed (a lost peer reset their connections) before the
// rendezvous could say their group was over; with no restart left, the
// agent asks it, hears the group was over, and runs the next group without
// counting a restart. Before, that failure ended the job.
TEST(AgentTest, AFailureOfAGroupAlreadyOverJoinsTheNextGroupUncounted) {
  test_support::TempDir dir;
  FakeRendezvous rendezvous;
  rendezvous.push(singleNode(2));
  WorkerGroup next = singleNode(2);
  next.attempt = 1;
  rendezvous.push(next);
  rendezvous.setFailureStands(false);
  const RunResult result =
      Agent(configFor(rendezvous, 2,
                      {"--env-to", dir.path().string(), "--only-attempt", "0", "--exit", "1"}))
          .run();
  EXPECT_EQ(result.exit_code, 0);
  EXPECT_EQ(result.attempts, 2);
  EXPECT_EQ(rendezvous.failureChecks(), std::vector<int>{0});
  EXPECT_EQ(rendezvous.restartRequests(), 0);
  EXPECT_EQ(readEnvFile(dir.path() / "0.env")["TORCHELASTIC_RESTART_COUNT"], "1");
}

// A failure the rendezvous says stands ends the run with its code, asked once.
TEST(AgentTest, AFailureThatStandsEndsTheRunAfterOneQuestion) {
  FakeRendezvous rendezvous(singleNode(2));
  const RunResult result =
      Agent(configFor(rendezvous, 2, {"--only-rank", "1", "--exit", "7"})).run();
  EXPECT_EQ(result.exit_code, 7);
  EXPECT_EQ(result.attempts, 1);
  EXPECT_EQ(rendezvous.failureChecks(), std::vector<int>{0});
}

// An abort elsewhere: the group is over, and there is no next one.
TEST(AgentTest, AJobEndedElsewhereStopsTheWorkersAtOnce) {
  test_support::TempDir dir;
  FakeRendezvous rendezvous;
  rendezvous.push(singleNode(2));
  auto run = std::async(std::launch::async, [&] {
    return Agent(configFor(rendezvous, 2, {"--ready-to", dir.path().string(), "--hang"})).run();
  });
  ASSERT_TRUE(test_support::eventually([&] { return readyFiles(dir, 2); }, 10s));
  rendezvous.endJob();
  rendezvous.declareOver(INT_MAX);
  ASSERT_EQ(run.wait_for(4s), std::future_status::ready) << "waited for the grace period";
  const RunResult result = run.get();
  EXPECT_TRUE(result.closed_elsewhere);
  EXPECT_TRUE(result.failures.empty());
}

// A rendezvous that never forms a group (a timeout, a refusal) ends the run
// with its one line and exit status 1.
TEST(AgentTest, ARendezvousErrorEndsTheRunWithItsLine) {
  FakeRendezvous rendezvous;
  rendezvous.fail("no round formed within join_timeout (1 s)");
  const RunResult result = Agent(configFor(rendezvous, 2, {})).run();
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_EQ(result.error, "no round formed within join_timeout (1 s)");
  EXPECT_FALSE(result.started);
}

// A worker that cannot be spawned is one line and exit 1: the workers already
// running are stopped, and run() returns (it used to end in std::terminate).
TEST(AgentTest, AWorkerThatCannotBeSpawnedEndsTheRunCleanly) {
  test_support::TempDir dir;
  FakeRendezvous rendezvous(singleNode(2));
  AgentConfig config = configFor(rendezvous, 2, {});
  config.command = [&dir](int local_rank) {
    return local_rank == 0 ? std::vector<std::string>{DDPRUN_FAKE_WORKER, "--ready-to",
                                                      dir.path().string(), "--hang"}
                           : std::vector<std::string>{"/no/such/program"};
  };
  const auto started = std::chrono::steady_clock::now();
  const RunResult result = Agent(config).run();
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_NE(result.error.find("cannot run '/no/such/program'"), std::string::npos) << result.error;
  EXPECT_LT(std::chrono::steady_clock::now() - started, 4s) << "waited for the grace period";
  EXPECT_EQ(rendezvous.restartRequests(), 0);
}

// Out of descriptors when a worker is spawned: the run ends with one line that
// says what could not be made and why (the errno text), exit 1.
TEST(AgentTest, ASpawnErrorCarriesTheErrnoText) {
  FakeRendezvous rendezvous(singleNode(2));
  Agent agent(configFor(rendezvous, 2, {}));
  rlimit saved{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &saved), 0);
  // The lowest free descriptor becomes the limit: no new one can be made.
  const int lowest_free = ::dup(STDIN_FILENO);
  ASSERT_GE(lowest_free, 0);
  ::close(lowest_free);
  rlimit lowered = saved;
  lowered.rlim_cur = static_cast<rlim_t>(lowest_free);
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &lowered), 0);
  const RunResult result = agent.run();
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &saved), 0);
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_NE(result.error.find(std::strerror(EMFILE)), std::string::npos) << result.error;
}

// SIGTERM while the agent waits for its group: it stops waiting at once.
TEST(AgentTest, ASignalWhileWaitingForAGroupEndsTheRun) {
  FakeRendezvous rendezvous;
  AgentConfig config = configFor(rendezvous, 2, {});
  config.signals_to_handle = {SIGTERM};
  auto run = std::async(std::launch::async, [&] { return Agent(config).run(); });
  ASSERT_TRUE(rendezvous.waitForCalls(1, 10s));
  ASSERT_EQ(kill(getpid(), SIGTERM), 0);
  ASSERT_EQ(run.wait_for(5s), std::future_status::ready);
  const RunResult result = run.get();
  EXPECT_EQ(result.exit_code, 128 + SIGTERM);
  EXPECT_EQ(result.attempts, 0);
  EXPECT_TRUE(rendezvous.cancelled());
}

}  // namespace
}  // namespace ddprun::launcher

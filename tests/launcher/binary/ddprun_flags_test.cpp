// The ddprun executable's flags as a torchrun user types them: abbreviated,
// --help, --print-completion, --virtual-local-rank seen from real workers,
// and the flag it refuses (--logs-specs) with its reason; --metrics-port's
// mistakes, each one line; LOGLEVEL and --event-log-handler console.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "ddprun/test_support/daemon_process.hpp"
#include "ddprun_binary_fixture.hpp"

namespace ddprun::launcher {
namespace {

using testing::DdprunBinaryTest;
using testing::Outcome;

using WorkerVariables = std::map<int, std::map<std::string, std::string>>;

// Tee'd lines "[default<local rank>]:NAME=VALUE" of workers that ran `env`,
// by the local rank in the prefix.
WorkerVariables variablesByLocalRank(const std::string& console) {
  WorkerVariables variables;
  std::istringstream lines(console);
  for (std::string line; std::getline(lines, line);) {
    const auto close = line.find("]:");
    const auto equals = line.find('=');
    if (line.rfind("[default", 0) != 0 || close == std::string::npos || equals < close) {
      continue;
    }
    const int local_rank = std::stoi(line.substr(8, close - 8));
    variables[local_rank][line.substr(close + 2, equals - close - 2)] = line.substr(equals + 1);
  }
  return variables;
}

// Three workers that print their environment, with ${local_rank} in their
// arguments: how torchrun's users see --virtual-local-rank.
std::vector<std::string> virtualEnvWorkers() {
  return {"--standalone",
          "--nproc-per-node",
          "3",
          "--virtual-local-rank",
          "--tee",
          "1",
          "--no-python",
          "/usr/bin/env",
          "MACRO=${local_rank}"};
}

TEST_F(DdprunBinaryTest, AbbreviatedFlagsStartTheJob) {
  const Outcome outcome = run({"--stand", "--nproc", "2", "--max_res", "1", "--no-p",
                               DDPRUN_FAKE_WORKER, "--env-to", dir_.path().string()});
  EXPECT_TRUE(outcome.status.success()) << outcome.stderr_text;
  EXPECT_TRUE(std::filesystem::exists(dir_.path() / "1.env")) << "two workers ran";
  EXPECT_NE(test_support::readFile(dir_.path() / "1.env").find("TORCHELASTIC_MAX_RESTARTS=1"),
            std::string::npos);
}

TEST_F(DdprunBinaryTest, AFlagGivenAValueAndAnAmbiguousPrefixAreBadFlags) {
  Outcome outcome = run({"--standalone=1", "--no-python", DDPRUN_FAKE_WORKER});
  EXPECT_EQ(outcome.status.code, 2);
  EXPECT_EQ(outcome.stderr_text.rfind("ddprun: --standalone '1': a flag takes no value\n", 0), 0u)
      << outcome.stderr_text;
  outcome = run({"--rdzv", "c10d", "--no-python", DDPRUN_FAKE_WORKER});
  EXPECT_EQ(outcome.status.code, 2);
  EXPECT_EQ(outcome.stderr_text.rfind("ddprun: ambiguous option: --rdzv could match "
                                      "--rdzv-backend, --rdzv-endpoint, --rdzv-id, --rdzv-conf\n",
                                      0),
            0u)
      << outcome.stderr_text;
}

TEST_F(DdprunBinaryTest, HelpNamesTheProgramAndTheScriptFirst) {
  const Outcome outcome = run({"--help"});
  EXPECT_TRUE(outcome.status.success());
  EXPECT_EQ(outcome.stdout_text.rfind("usage: ddprun [-h] ", 0), 0u) << outcome.stdout_text;
  const std::string usage = outcome.stdout_text.substr(0, outcome.stdout_text.find("\n\n"));
  EXPECT_TRUE(usage.ends_with(" training_script ...")) << usage;
  EXPECT_NE(outcome.stdout_text.find("\npositional arguments:\n  training_script "),
            std::string::npos);
}

TEST_F(DdprunBinaryTest, PrintCompletionPrintsAScriptAndStartsNothing) {
  Outcome outcome = run({"--print-completion", "bash"});
  EXPECT_TRUE(outcome.status.success()) << outcome.stderr_text;
  EXPECT_NE(outcome.stdout_text.find("\ncomplete -o filenames -o bashdefault -F _ddprun ddprun\n"),
            std::string::npos)
      << outcome.stdout_text;
  EXPECT_EQ(outcome.stderr_text, "") << "nothing started, nothing logged";
  outcome = run({"--print_completion=zsh"});
  EXPECT_TRUE(outcome.status.success()) << outcome.stderr_text;
  EXPECT_EQ(outcome.stdout_text.rfind("#compdef ddprun\n", 0), 0u);
  outcome = run({"--print-completion", "fish"});
  EXPECT_EQ(outcome.status.code, 2);
  EXPECT_EQ(outcome.stderr_text.rfind(
                "ddprun: --print-completion 'fish': expected bash, tcsh or zsh\n", 0),
            0u)
      << outcome.stderr_text;
}

// LOGLEVEL=WARNING quiets the agent's info lines (the round it joined, the
// workers it started) and leaves its warnings; DEBUG adds its debug lines.
TEST_F(DdprunBinaryTest, LoglevelQuietsOrWidensTheAgentsLog) {
  const std::vector<std::string> job = {"--standalone", "--nproc-per-node", "2", "--no-python",
                                        "/bin/true"};
  const Outcome plain = run(job);
  ASSERT_TRUE(plain.status.success()) << plain.stderr_text;
  ASSERT_NE(plain.stderr_text.find("[info]"), std::string::npos) << plain.stderr_text;

  extra_env_ = {{"LOGLEVEL", "WARNING"}};
  const Outcome quiet = run(job);
  EXPECT_TRUE(quiet.status.success()) << quiet.stderr_text;
  EXPECT_EQ(quiet.stderr_text.find("[info]"), std::string::npos) << quiet.stderr_text;

  extra_env_ = {{"LOGLEVEL", "DEBUG"}};
  const Outcome loud = run(job);
  EXPECT_TRUE(loud.status.success()) << loud.stderr_text;
  EXPECT_NE(loud.stderr_text.find("[debug]"), std::string::npos) << loud.stderr_text;

  extra_env_ = {{"LOGLEVEL", "loud"}};
  const Outcome bad = run(job);
  EXPECT_EQ(bad.status, (ExitStatus{ExitStatus::Kind::Exited, 2}));
  EXPECT_TRUE(bad.stderr_text.starts_with("ddprun: LOGLEVEL 'loud': not a log level"))
      << bad.stderr_text;
}

// The states of the torchrun events (--event-log-handler console) on
// ddprun's stderr, one JSON line each, in the order written.
std::vector<std::string> torchEventStates(const std::string& console) {
  std::vector<std::string> states;
  std::istringstream lines(console);
  for (std::string line; std::getline(lines, line);) {
    if (line.starts_with("{\"name\":\"torchelastic.worker.status.")) {
      const auto event = nlohmann::json::parse(line);
      states.push_back(event["source"].get<std::string>() + " " +
                       event["metadata"]["state"].get<std::string>());
    }
  }
  return states;
}

// torchrun prints its events on the console with --event-log-handler
// console; ddprun prints each round, each worker's start and end, each
// restart and the end of the job there, and nothing without the flag.
TEST_F(DdprunBinaryTest, EventLogHandlerConsolePrintsTorchrunsEvents) {
  const std::vector<std::string> job = {"--standalone",
                                        "--nproc-per-node",
                                        "2",
                                        "--max-restarts",
                                        "1",
                                        "--no-python",
                                        DDPRUN_FAKE_WORKER,
                                        "--only-rank",
                                        "1",
                                        "--only-attempt",
                                        "0",
                                        "--exit",
                                        "3"};
  std::vector<std::string> with_events = {"--event-log-handler", "console"};
  with_events.insert(with_events.end(), job.begin(), job.end());
  const Outcome outcome = run(with_events);
  ASSERT_TRUE(outcome.status.success()) << outcome.stderr_text;
  std::vector<std::string> states = torchEventStates(outcome.stderr_text);
  ASSERT_EQ(states.size(), 12u) << outcome.stderr_text;
  // How one attempt's worker starts and ends interleave is the kernel's
  // choice: each attempt's four worker events are compared sorted. The two
  // workers start together, so in the first attempt rank 0 either ends on
  // its own (SUCCEEDED) or is still starting when rank 1's failure stops the
  // group (TERMINATED, by the agent's SIGTERM): both are right.
  std::replace(states.begin() + 1, states.begin() + 5, std::string("WORKER TERMINATED"),
               std::string("WORKER SUCCEEDED"));
  std::sort(states.begin() + 1, states.begin() + 5);
  std::sort(states.begin() + 7, states.begin() + 11);
  EXPECT_EQ(states,
            (std::vector<std::string>{"AGENT RENDEZVOUS", "WORKER FAILED", "WORKER STARTED",
                                      "WORKER STARTED", "WORKER SUCCEEDED", "AGENT RESTARTING",
                                      "AGENT RENDEZVOUS", "WORKER STARTED", "WORKER STARTED",
                                      "WORKER SUCCEEDED", "WORKER SUCCEEDED", "AGENT SUCCEEDED"}))
      << outcome.stderr_text;

  const Outcome quiet = run(job);
  ASSERT_TRUE(quiet.status.success()) << quiet.stderr_text;
  EXPECT_TRUE(torchEventStates(quiet.stderr_text).empty()) << quiet.stderr_text;

  // torchrun's events logger takes its level from LOGLEVEL too.
  extra_env_ = {{"LOGLEVEL", "WARNING"}};
  const Outcome warnings_only = run(with_events);
  ASSERT_TRUE(warnings_only.status.success()) << warnings_only.stderr_text;
  EXPECT_TRUE(torchEventStates(warnings_only.stderr_text).empty()) << warnings_only.stderr_text;
}

TEST_F(DdprunBinaryTest, LogsSpecsIsRefusedSayingWhy) {
  const Outcome outcome = run({"--logs-specs", "custom", "--no-python", DDPRUN_FAKE_WORKER});
  EXPECT_EQ(outcome.status.code, 2);
  EXPECT_EQ(outcome.stderr_text,
            "ddprun: --logs-specs custom: names a Python entry point (group torchrun.logs_specs) "
            "that loads a LogsSpecs class, and ddprun has no Python interpreter to load it into\n");
}

// docs/torchrun-contract.md §5.2: LOCAL_RANK=0 and one device each, while
// RANK, the log prefix and ${local_rank} keep the real local rank.
TEST_F(DdprunBinaryTest, VirtualLocalRankNarrowsTheAgentsDevicesPerWorker) {
  extra_env_ = {{"CUDA_VISIBLE_DEVICES", "4,6,7,9"}};
  Outcome outcome = run(virtualEnvWorkers());
  ASSERT_TRUE(outcome.status.success()) << outcome.stderr_text;
  WorkerVariables workers = variablesByLocalRank(outcome.stdout_text);
  ASSERT_EQ(workers.size(), 3u) << outcome.stdout_text;
  const std::vector<std::string> devices = {"4", "6", "7"};
  for (int local_rank = 0; local_rank < 3; ++local_rank) {
    SCOPED_TRACE(local_rank);
    EXPECT_EQ(workers[local_rank]["LOCAL_RANK"], "0");
    EXPECT_EQ(workers[local_rank]["CUDA_VISIBLE_DEVICES"], devices[local_rank]);
    EXPECT_EQ(workers[local_rank]["RANK"], std::to_string(local_rank));
    EXPECT_EQ(workers[local_rank]["MACRO"], std::to_string(local_rank));
  }

  extra_env_.clear();
  outcome = run(virtualEnvWorkers());
  ASSERT_TRUE(outcome.status.success()) << outcome.stderr_text;
  workers = variablesByLocalRank(outcome.stdout_text);
  ASSERT_EQ(workers.size(), 3u) << outcome.stdout_text;
  for (int local_rank = 0; local_rank < 3; ++local_rank) {
    EXPECT_EQ(workers[local_rank]["LOCAL_RANK"], "0");
    EXPECT_EQ(workers[local_rank]["CUDA_VISIBLE_DEVICES"], std::to_string(local_rank));
  }
}

TEST_F(DdprunBinaryTest, VirtualLocalRankWithTooFewDevicesStartsNothing) {
  extra_env_ = {{"CUDA_VISIBLE_DEVICES", "4,6"}};
  const Outcome outcome = run(virtualEnvWorkers());
  EXPECT_EQ(outcome.status.code, 2);
  EXPECT_EQ(outcome.stderr_text,
            "ddprun: --virtual-local-rank: local rank 2 has no device of its own: "
            "CUDA_VISIBLE_DEVICES='4,6' lists 2 for 3 workers\n");
  EXPECT_EQ(outcome.stdout_text, "") << "no worker ran";
}

// The metrics cannot listen: one line before any worker starts, exit 1.
TEST_F(DdprunBinaryTest, AMetricsPortAlreadyTakenIsOneLineAndNoWorkerStarts) {
  test_support::DaemonProcess taken({"--host", "127.0.0.1"});
  const std::string port = std::to_string(taken.port());
  const Outcome outcome =
      runFor({"--standalone", "--metrics-port", port, "--metrics-host", "127.0.0.1", "--no-python",
              DDPRUN_FAKE_WORKER, "--env-to", dir_.path().string()},
             std::chrono::seconds(60));
  EXPECT_EQ(outcome.status.shellCode(), 1) << outcome.stderr_text;
  EXPECT_TRUE(outcome.stderr_text.ends_with("ddprun: metrics: cannot listen (127.0.0.1:" + port +
                                            ": Address already in use)\n"))
      << outcome.stderr_text;
  EXPECT_FALSE(std::filesystem::exists(dir_.path() / "0.env")) << "no worker ran";
}

TEST_F(DdprunBinaryTest, AMetricsHostThatIsNoAddressIsABadFlag) {
  const Outcome outcome = run({"--standalone", "--metrics-port", "0", "--metrics-host", "nowhere",
                               "--no-python", DDPRUN_FAKE_WORKER});
  EXPECT_EQ(outcome.status.shellCode(), 2) << outcome.stderr_text;
  EXPECT_TRUE(
      outcome.stderr_text.starts_with("ddprun: --metrics-host 'nowhere': not an IP "
                                      "address\nusage: ddprun"))
      << outcome.stderr_text;
}

}  // namespace
}  // namespace ddprun::launcher

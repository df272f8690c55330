// torchrun's console events (--event-log-handler console) with no agent:
// each AgentEvents call read back as one line of torchrun's Event JSON, with
// torchrun's names, sources and metadata fields, in torchrun's order.
#include "ddprun/launcher/observe/torch_events.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "ddprun/launcher/process/subprocess.hpp"

namespace ddprun::launcher {
namespace {

using json = nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

class TorchEventLogTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(::pipe(pipe_), 0); }
  void TearDown() override {
    ::close(pipe_[0]);
    ::close(pipe_[1]);
  }

  TorchEventLog log() {
    return TorchEventLog({"job7", "trainer", "node0.example", "c10d", "/usr/bin/python3", 3},
                         pipe_[1]);
  }

  // Every line written so far, parsed; each must be one whole JSON object.
  std::vector<json> lines() {
    ::close(pipe_[1]);
    pipe_[1] = -1;
    std::string text;
    char buffer[4096];
    for (ssize_t n; (n = ::read(pipe_[0], buffer, sizeof buffer)) > 0;) {
      text.append(buffer, static_cast<std::size_t>(n));
    }
    EXPECT_TRUE(text.empty() || text.back() == '\n');
    std::vector<json> events;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) {
      events.push_back(json::parse(line));
    }
    return events;
  }

  int pipe_[2] = {-1, -1};
};

WorkerGroup twoNodeGroup() {
  WorkerGroup group;
  group.group_rank = 1;
  group.group_world_size = 2;
  group.base_rank = 2;
  group.world_size = 4;
  return group;
}

TEST_F(TorchEventLogTest, ARoundIsTorchrunsRendezvousEventWithItsWait) {
  auto events = log();
  events.roundJoined(twoNodeGroup(), 250ms, Clock::now());
  const auto written = lines();
  ASSERT_EQ(written.size(), 1u);
  const json& event = written[0];
  EXPECT_EQ(event["name"], "torchelastic.worker.status.RENDEZVOUS");
  EXPECT_EQ(event["source"], "AGENT");
  EXPECT_GT(event["timestamp"].get<long long>(), 1'600'000'000'000LL);  // ms since the epoch
  const json& metadata = event["metadata"];
  std::vector<std::string> keys;
  for (const auto& [key, value] : metadata.items()) {
    keys.push_back(key);
  }
  // SimpleElasticAgent._construct_event's fields, in its order.
  EXPECT_EQ(keys,
            (std::vector<std::string>{"run_id", "global_rank", "group_rank", "worker_id", "role",
                                      "hostname", "state", "total_run_time", "rdzv_backend",
                                      "raw_error", "metadata", "agent_restarts", "duration_ms"}));
  EXPECT_EQ(metadata["run_id"], "job7");
  EXPECT_TRUE(metadata["global_rank"].is_null());
  EXPECT_EQ(metadata["group_rank"], 1);
  EXPECT_EQ(metadata["role"], "trainer");
  EXPECT_EQ(metadata["hostname"], "node0.example");
  EXPECT_EQ(metadata["state"], "RENDEZVOUS");
  EXPECT_EQ(metadata["rdzv_backend"], "c10d");
  EXPECT_DOUBLE_EQ(metadata["duration_ms"].get<double>(), 250.0);
  // torchrun's inner metadata is itself a JSON string.
  const json inner = json::parse(metadata["metadata"].get<std::string>());
  EXPECT_EQ(inner, (json{{"group_world_size", 2}, {"entry_point", "/usr/bin/python3"}}));
}

TEST_F(TorchEventLogTest, AWorkersLifeIsStartedThenItsEndAsTorchrunNamesIt) {
  auto events = log();
  events.roundJoined(twoNodeGroup(), 0ms, Clock::now());
  events.workerStarted(0, 2, 4242, Clock::now());
  events.workerExited(0, 2, 4242, {ExitStatus::Kind::Exited, 3}, true, Clock::now());
  events.workerExited(1, 3, 4243, {ExitStatus::Kind::Signaled, SIGTERM}, false, Clock::now());
  events.workerExited(1, 3, 4244, {ExitStatus::Kind::Exited, 0}, false, Clock::now());
  const auto written = lines();
  ASSERT_EQ(written.size(), 5u);
  const json& started = written[1];
  EXPECT_EQ(started["name"], "torchelastic.worker.status.STARTED");
  EXPECT_EQ(started["source"], "WORKER");
  EXPECT_EQ(started["metadata"]["global_rank"], 2);
  EXPECT_EQ(started["metadata"]["worker_id"], "4242");
  const json inner = json::parse(started["metadata"]["metadata"].get<std::string>());
  EXPECT_EQ(inner["local_rank"], json::array({0}));
  EXPECT_EQ(inner["role_rank"], json::array({2}));
  EXPECT_EQ(inner["role_world_size"], json::array({4}));

  EXPECT_EQ(written[2]["metadata"]["state"], "FAILED");
  EXPECT_EQ(written[2]["metadata"]["raw_error"], "exited with code 3");
  EXPECT_EQ(written[3]["metadata"]["state"], "TERMINATED");  // the agent stopped it
  EXPECT_TRUE(written[3]["metadata"]["raw_error"].is_null());
  EXPECT_EQ(written[4]["metadata"]["state"], "SUCCEEDED");
}

TEST_F(TorchEventLogTest, RestartsAreCountedAndTheEndSaysWhetherTheJobSucceeded) {
  auto events = log();
  events.roundJoined(twoNodeGroup(), 0ms, Clock::now());
  events.workerHung(1, 3, "no progress for 60 s", "", Clock::now());
  events.restarting(1, 3, Clock::now());
  events.finished(0, Clock::now());
  events.finished(1, Clock::now());
  const auto written = lines();
  ASSERT_EQ(written.size(), 5u);
  EXPECT_EQ(written[1]["metadata"]["state"], "UNHEALTHY");
  EXPECT_EQ(written[1]["metadata"]["raw_error"], "no progress for 60 s");
  EXPECT_EQ(written[2]["name"], "torchelastic.worker.status.RESTARTING");
  EXPECT_EQ(written[2]["metadata"]["agent_restarts"], 1);
  EXPECT_EQ(written[3]["name"], "torchelastic.worker.status.SUCCEEDED");
  EXPECT_EQ(written[3]["source"], "AGENT");
  EXPECT_EQ(written[3]["metadata"]["agent_restarts"], 1);
  EXPECT_EQ(written[4]["name"], "torchelastic.worker.status.FAILED");
  EXPECT_EQ(written[4]["metadata"]["raw_error"], "ddprun exits with status 1");
}

// A run id or host name that is not UTF-8 still makes a line JSON can read.
TEST_F(TorchEventLogTest, TextThatIsNotUtf8StillMakesOneJsonLine) {
  TorchEventLog events({"run\xff\n", "default", "h\xc3", "static", "train", 0}, pipe_[1]);
  events.finished(0, Clock::now());
  const auto written = lines();
  ASSERT_EQ(written.size(), 1u);
  EXPECT_EQ(written[0]["metadata"]["run_id"].get<std::string>().back(), '\n');
}

}  // namespace
}  // namespace ddprun::launcher

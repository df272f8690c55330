// Losing the rendezvous across real (namespaced) hosts, with `train`: the
// agent that hosts a c10d rendezvous is SIGKILLed (the other host stops its
// workers at once; the agent restarted on its host hosts it again, and the
// job resumes from the snapshot), static node 0 likewise, and an external
// ddprund killed and restarted on its port while training goes on untouched.
#include <signal.h>

#include <sstream>

#include "netns_train_fixture.hpp"

namespace ddprun::netns_test {
namespace {

class NetnsLossTest : public NetnsTrainTest {
 protected:
  static constexpr int kEpochs = 30;

  // The mission's line on node `rank`, with `extra` flags, training 30 epochs.
  std::vector<std::string> missionLine(int rank, const std::vector<std::string>& extra) {
    std::vector<std::string> args = {"--nnodes=2", "--node-rank=" + std::to_string(rank),
                                     "--nproc-per-node=2", "--rdzv-endpoint=h1:29603"};
    args.insert(args.end(), extra.begin(), extra.end());
    const std::vector<std::string> program = train(kEpochs, {"--samples", "20000"});
    args.insert(args.end(), program.begin(), program.end());
    return args;
  }

  // The pids of the `train` processes on `host`.
  std::vector<pid_t> trainers(const std::string& host) const {
    std::vector<pid_t> pids;
    std::istringstream listed(
        runCommand({ipBinary(), "netns", "pids", lab_->namespaceOf(host)}).output);
    for (pid_t pid = 0; listed >> pid;) {
      if (readFile("/proc/" + std::to_string(pid) + "/comm") == "train\n") {
        pids.push_back(pid);
      }
    }
    return pids;
  }

  bool training(const std::vector<std::string>& names, int saves) const {
    std::string text;
    for (const std::string& name : names) {
      text += log(name);
    }
    return contains(text, "world 4 (gloo)") && savesAfter(text, 0) >= saves;
  }

  bool logShows(const std::string& name, const std::string& part,
                std::chrono::milliseconds within) const {
    return test_support::eventually([&] { return contains(log(name), part); }, within, 5ms);
  }

  // Kills `victim`, then checks that `survivor` (on `host`) says it lost
  // `what` and that its workers are gone; reports both delays.
  void killAndWatchTheSurvivor(Subprocess& victim, const std::string& survivor,
                               const std::string& host, const std::string& what) {
    ASSERT_FALSE(trainers(host).empty()) << logs({"a", "b"});
    const auto killed = std::chrono::steady_clock::now();
    ASSERT_EQ(::kill(victim.pid(), SIGKILL), 0);
    ASSERT_TRUE(logShows(survivor, what, 30s)) << logs({"a", "b"});
    const auto noticed = std::chrono::steady_clock::now();
    report("kill_to_notice_ms", millisSince(killed));
    ASSERT_TRUE(test_support::eventually([&] { return trainers(host).empty(); }, 10s, 5ms))
        << "the survivor's workers still run" << logs({"a", "b"});
    report("notice_to_workers_stopped_ms", millisSince(noticed));
  }

  // The agent finished with success (`all` name the logs to show if not).
  void expectFinished(Subprocess& agent, const std::vector<std::string>& all) {
    const auto status = agent.waitFor(240s);
    ASSERT_TRUE(status && status->success()) << describe(status) << logs(all);
  }
};

// The agent on h1 hosts the rendezvous of the mission's c10d line and is
// SIGKILLed mid-training; h2's agent stops its workers at once. The agent
// restarted on h1 hosts the rendezvous again, h2 rejoins, and training
// resumes from the snapshot at world 4 and finishes.
TEST_F(NetnsLossTest, TheRendezvousHostIsLostThenRestartedOnItsHost) {
  buildLab(2, /*with_daemon=*/false);
  const std::string train_dir = fs::path(TRAIN_BINARY).parent_path().string();
  const std::vector<std::string> c10d = {"--rdzv-backend=c10d"};
  Subprocess a = ddprunOn("a", "h1", missionLine(0, c10d), train_dir);
  ASSERT_TRUE(logShows("a", "hosting the rendezvous", 30s)) << log("a");
  Subprocess b = ddprunOn("b", "h2", missionLine(1, c10d), train_dir);
  ASSERT_TRUE(test_support::eventually(
      [&] {
        return training({"a", "b"}, 2);
      },
      120s, 20ms))
      << logs({"a", "b"});
  killAndWatchTheSurvivor(a, "b", "h2", "lost the rendezvous hosted by");
  Subprocess again = ddprunOn("a2", "h1", missionLine(0, c10d), train_dir);
  expectFinished(b, {"a2", "b"});
  expectFinished(again, {"a2", "b"});
  EXPECT_TRUE(contains(log("a2"), "hosting the rendezvous")) << log("a2");
  EXPECT_TRUE(contains(log("a2"), "train: resuming from " + snapshot())) << log("a2");
  EXPECT_EQ(snapshotEpochs(), kEpochs);
}

// Static node 0 (the store's host) is SIGKILLed mid-training; node 1 stops
// its workers at once and waits; node 0 restarted, the job re-forms and
// resumes from the snapshot.
TEST_F(NetnsLossTest, StaticNodeZeroIsLostThenRestarted) {
  buildLab(2, /*with_daemon=*/false);
  const std::string train_dir = fs::path(TRAIN_BINARY).parent_path().string();
  Subprocess a = ddprunOn("a", "h1", missionLine(0, {}), train_dir);
  Subprocess b = ddprunOn("b", "h2", missionLine(1, {}), train_dir);
  ASSERT_TRUE(test_support::eventually(
      [&] {
        return training({"a", "b"}, 2);
      },
      120s, 20ms))
      << logs({"a", "b"});
  killAndWatchTheSurvivor(a, "b", "h2", "lost node rank 0");
  Subprocess again = ddprunOn("a2", "h1", missionLine(0, {}), train_dir);
  expectFinished(b, {"a2", "b"});
  expectFinished(again, {"a2", "b"});
  EXPECT_TRUE(contains(log("a2"), "train: resuming from " + snapshot())) << log("a2");
  EXPECT_EQ(snapshotEpochs(), kEpochs);
}

// An external ddprund is SIGKILLed mid-training and restarted on its port:
// the agents reconnect and rejoin, the workers never stop (no resume, no new
// round), and the job ends through the restarted daemon's exit barrier.
TEST_F(NetnsLossTest, AnExternalDaemonRestartedMidTrainingStopsNoWorker) {
  buildLab(2);
  const std::string port = std::to_string(daemon_->port());
  const std::vector<std::string> program = train(kEpochs, {"--samples", "20000"});
  Subprocess a = agent("a", "h1", "2", program);
  Subprocess b = agent("b", "h2", "2", program);
  ASSERT_TRUE(test_support::eventually(
      [&] {
        return training({"a", "b"}, 2);
      },
      120s, 20ms))
      << logs({"a", "b"});
  ASSERT_EQ(::kill(daemon_->pid(), SIGKILL), 0);
  daemon_->stop();
  ASSERT_TRUE(logShows("a", "lost the rendezvous daemon", 10s)) << logs({"a", "b"});
  daemon_.reset();
  daemon_.emplace(ipBinary(),
                  std::vector<std::string>{"netns", "exec", lab_->namespaceOf("h0"), DDPRUND_BINARY,
                                           "--host", lab_->address("h0"), "--port", port});
  EXPECT_TRUE(logShows("a", "reconnected", 20s)) << logs({"a", "b"});
  EXPECT_TRUE(logShows("b", "reconnected", 20s)) << logs({"a", "b"});
  expectFinished(a, {"a", "b"});
  expectFinished(b, {"a", "b"});
  EXPECT_EQ(snapshotEpochs(), kEpochs);
  for (const std::string name : {"a", "b"}) {
    EXPECT_FALSE(contains(log(name), "resuming from")) << "workers restarted" << log(name);
    EXPECT_FALSE(contains(log(name), "round 1:")) << "a new round formed" << log(name);
  }
}

}  // namespace
}  // namespace ddprun::netns_test

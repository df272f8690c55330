// `train` (LibTorch DDP over Gloo) under the etcd-v3 rendezvous: two agents
// of 2 workers each meet in a real 3-member etcd cluster on loopback and
// train to the end, also when etcd's leader is SIGKILLed mid-training (the
// job must not notice: no new round).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ddprun/test_support/train_snapshot.hpp"
#include "etcd_job_fixture.hpp"

namespace ddprun::launcher {
namespace {

using namespace std::chrono_literals;

using test_support::contains;
using testing::EtcdJobTest;

class EtcdTrainTest : public EtcdJobTest {
 protected:
  std::string snapshot() const { return (dir_.path() / "snapshot.pt").string(); }

  // An agent of 2 `train` workers (mlp, a snapshot every epoch), Gloo on
  // loopback.
  Subprocess trainAgent(const std::string& name, int epochs, int samples = 2048) {
    return etcdAgent(name, "2", 2,
                     {TRAIN_BINARY, "--task", "mlp", "--samples", std::to_string(samples),
                      "--total-epochs", std::to_string(epochs), "--save-every", "1", "--batch-size",
                      "32", "--snapshot-path", snapshot(), "--timeout", "60"},
                     kShortLeases, "", {{"GLOO_SOCKET_IFNAME", "lo"}});
  }

  // Epochs the snapshot holds; -1 if none.
  int snapshotEpochs() const { return test_support::trainSnapshotEpochs(TRAIN_BINARY, snapshot()); }

  void expectBothFinish(Subprocess& a, Subprocess& b) {
    for (auto [name, agent] : {std::pair{"a", &a}, std::pair{"b", &b}}) {
      const auto status = agent->waitFor(120s);
      ASSERT_TRUE(status) << name << " still runs" << logs({"a", "b"});
      EXPECT_TRUE(status->success()) << name << ": " << status->shellCode() << logs({"a", "b"});
    }
  }
};

// 2 nodes x 2 workers to the end: both agents exit 0, the snapshot holds
// every epoch, node 0 trained as a world of 4.
TEST_F(EtcdTrainTest, TwoNodesTrainAsAWorldOfFour) {
  Subprocess a = trainAgent("a", 3);
  Subprocess b = trainAgent("b", 3);
  ASSERT_NO_FATAL_FAILURE(expectBothFinish(a, b));
  EXPECT_EQ(snapshotEpochs(), 3);
  EXPECT_TRUE(contains(log("a") + log("b"), "world 4 (gloo)")) << logs({"a", "b"});
}

// etcd's leader is SIGKILLed once the first epoch is saved: the other two
// members elect a new one, the leases hold, and training goes on in round 0
// to the last epoch.
TEST_F(EtcdTrainTest, ALostEtcdLeaderCostsNoRestart) {
  // Epochs of about half a second here, so the leader dies mid-training and
  // the new one is elected (about 0.5 s) well before the end.
  constexpr int kEpochs = 12;
  Subprocess a = trainAgent("a", kEpochs, 16384);
  Subprocess b = trainAgent("b", kEpochs, 16384);
  ASSERT_TRUE(test_support::eventually(
      [&] { return contains(log("a") + log("b"), "snapshot saved"); }, 60s, 10ms))
      << logs({"a", "b"});
  const bool still_training = !a.tryWait() && !b.tryWait();
  ASSERT_TRUE(still_training) << "training ended before the leader's loss" << logs({"a", "b"});
  cluster().kill(cluster().leader());
  ASSERT_NO_FATAL_FAILURE(expectBothFinish(a, b));
  EXPECT_EQ(snapshotEpochs(), kEpochs);
  for (const std::string name : {"a", "b"}) {
    EXPECT_TRUE(contains(log(name), "round 0: node")) << logs({"a", "b"});
    EXPECT_FALSE(contains(log(name), "round 1: node")) << logs({"a", "b"});
    EXPECT_FALSE(contains(log(name), "restarting the worker group")) << logs({"a", "b"});
  }
}

}  // namespace
}  // namespace ddprun::launcher

// `ddprun --hostfile` across real test hosts over real ssh: an sshd (Debian's
// openssh-server, the test's own key) on h1 and h2, and the launch typed on
// h0 with a hostfile of the two. A 2-host x 2-worker `train` job runs from
// that one command to its end; Ctrl-C or kill -9 of the launching process
// leaves nothing on either host; and a host whose sshd dies mid-job (its
// session with it) ends the job in one line naming it, leaving nothing, or,
// with --nnodes 1:2, leaves the other host to train on alone to the end.
#include <signal.h>

#include <fstream>
#include <string>
#include <vector>

#include "ddprun/test_support/proc_status.hpp"
#include "netns_train_fixture.hpp"
#include "sshd_lab.hpp"

namespace ddprun::netns_test {
namespace {

using test_support::processesWith;

class NetnsHostfileTest : public NetnsTrainTest {
 protected:
  void startLab() {
    own_host_names_ = true;  // h0's agents are told "h0:PORT": every host must resolve it
    buildLab(2, /*with_daemon=*/false);
    sshd_.emplace(*lab_, std::vector<std::string>{"h1", "h2"}, dir_.path() / "ssh", "h0");
    std::ofstream(hostfile()) << "h1 slots=2\nh2 slots=2\n";
  }

  std::string hostfile() const { return (dir_.path() / "hosts").string(); }

  // The launch on h0: `ddprun --hostfile ... train ...`, with ddprun and
  // train on the PATH every host gets.
  Subprocess launch(const std::vector<std::string>& program,
                    const std::vector<std::string>& flags = {}) {
    std::vector<std::string> args = {"--hostfile",        hostfile(),           "--ssh-command",
                                     sshd_->sshCommand(), "--shutdown-timeout", "5"};
    args.insert(args.end(), flags.begin(), flags.end());
    args.insert(args.end(), program.begin(), program.end());
    const std::string path = fs::path(DDPRUN_BINARY).parent_path().string() + ":" +
                             fs::path(TRAIN_BINARY).parent_path().string();
    return ddprunOn("launch", "h0", args, path);
  }

  // `train` as a user types it; its snapshot path (in this test's own
  // directory) marks every process of the job, agents included.
  std::vector<std::string> trainProgram(int epochs) {
    std::vector<std::string> program = train(epochs);
    program.front() = "train";
    return program;
  }

  std::optional<SshdOnHosts> sshd_;
};

TEST_F(NetnsHostfileTest, OneCommandTrainsTwoHostsToTheEnd) {
  startLab();
  Subprocess launched = launch(trainProgram(2));
  const auto status = launched.waitFor(180s);
  ASSERT_TRUE(status && status->success()) << describe(status) << log("launch");
  EXPECT_EQ(snapshotEpochs(), 2);
  const std::string text = log("launch");
  EXPECT_TRUE(contains(text, "world 4 (gloo), batch 32 x 4")) << text;
  EXPECT_TRUE(contains(text, "h1: ") && contains(text, "h2: ")) << text;
}

// Ctrl-C stops every host's agent and its workers (exit 130); kill -9 of
// the launching process ends its ssh clients, each sshd ends its session,
// and the agent there sees its input end and stops. Either way nothing of
// the job is left on any host.
TEST_F(NetnsHostfileTest, CtrlCOrKillNineOfTheLaunchLeavesNothingOnEitherHost) {
  startLab();
  const std::string marker = snapshot();
  for (const int signal : {SIGINT, SIGKILL}) {
    SCOPED_TRACE(signal);
    Subprocess launched = launch(trainProgram(100000));
    ASSERT_TRUE(
        test_support::eventually([&] { return contains(log("launch"), "| snapshot saved"); }, 120s))
        << log("launch");
    ::kill(launched.pid(), signal);
    const ExitStatus status = launched.wait();
    if (signal == SIGINT) {
      EXPECT_EQ(status.shellCode(), 130) << log("launch");
    }
    EXPECT_TRUE(test_support::eventually([&] { return processesWith(marker) == 0; }, 30s))
        << processesWith(marker) << " process(es) left\n"
        << log("launch");
  }
}

TEST_F(NetnsHostfileTest, AHostWhoseSshdDiesEndsTheJobNamingIt) {
  startLab();
  const std::string marker = snapshot();
  Subprocess launched = launch(trainProgram(1000));
  ASSERT_TRUE(
      test_support::eventually([&] { return contains(log("launch"), "| snapshot saved"); }, 120s))
      << log("launch");
  sshd_->killHost("h2");
  const auto status = launched.waitFor(60s);
  ASSERT_TRUE(status) << "the launch never ended\n" << log("launch");
  EXPECT_FALSE(status->success());
  EXPECT_TRUE(contains(log("launch"),
                       "ddprun: host h2: the ssh session failed or dropped (ssh exited 255): the "
                       "host is lost\n"))
      << log("launch");
  EXPECT_TRUE(test_support::eventually([&] { return processesWith(marker) == 0; }, 30s))
      << processesWith(marker) << " process(es) left\n"
      << log("launch");
}

TEST_F(NetnsHostfileTest, WithARangeOfNodesALostHostLeavesTheOtherToTrainOn) {
  startLab();
  Subprocess launched = launch(trainProgram(40), {"--nnodes", "1:2", "--max-restarts", "3"});
  ASSERT_TRUE(
      test_support::eventually([&] { return contains(log("launch"), "| snapshot saved"); }, 120s))
      << log("launch");
  sshd_->killHost("h2");
  const auto status = launched.waitFor(180s);
  ASSERT_TRUE(status && status->success()) << describe(status) << log("launch");
  EXPECT_EQ(snapshotEpochs(), 40);
  EXPECT_TRUE(contains(log("launch"), "the job goes on without it (--nnodes 1:2)"))
      << log("launch");
  EXPECT_TRUE(contains(log("launch"), "h1: train: task mlp, 2048 samples, world 2"))
      << log("launch");
}

}  // namespace
}  // namespace ddprun::netns_test

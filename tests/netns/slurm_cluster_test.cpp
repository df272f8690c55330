// ddprun under a real Slurm cluster (SlurmJobTest: munged, slurmctld and a
// slurmd per host in network namespaces): deploy/slurm/train.sbatch runs
// `srun ddprun train` over two nodes, and what Slurm does to a job reaches
// ddprun and its workers as it would on a real cluster: the exit codes Slurm
// records, scancel, requeue, the warning signal before the time limit.
#include <iostream>
#include <regex>

#include "ddprun/test_support/text.hpp"
#include "slurm_job_fixture.hpp"

namespace ddprun::netns_test {
namespace {

using test_support::countOf;

// The cluster itself: a two-node step runs once on each node's address.
TEST_F(SlurmJobTest, ATwoNodeStepRunsOnceOnEachNode) {
  const int job = cluster_->submit({"--nodes=2", "--chdir=" + dir_.path().string(),
                                    "--output=" + (dir_.path() / "job-%j.out").string(), "--wrap",
                                    "srun sh -c 'echo \"node $SLURM_NODEID at $(hostname -I)\"'"},
                                   jobEnvironment());
  const SlurmRecord done = cluster_->awaitJobState(job, {"COMPLETED", "FAILED"}, 60s);
  ASSERT_EQ(done.count("JobState") ? done.at("JobState") : "", "COMPLETED") << story(job);
  const std::string output = jobOutput(job);
  EXPECT_TRUE(output.find("node 0 at " + lab_->address("h1")) != std::string::npos) << output;
  EXPECT_TRUE(output.find("node 1 at " + lab_->address("h2")) != std::string::npos) << output;
}

// With own_hostnames (as slurm_bench runs torchrun), each node's steps see
// the node's name as host name, and it resolves to the node's address.
class SlurmOwnHostnamesTest : public SlurmJobTest {
 protected:
  SlurmLayout layout() const override {
    SlurmLayout own;
    own.own_hostnames = true;
    return own;
  }
};

TEST_F(SlurmOwnHostnamesTest, EachNodeIsNamedAfterItselfAndResolvesToItsAddress) {
  const int job = cluster_->submit(
      {"--nodes=2", "--chdir=" + dir_.path().string(),
       "--output=" + (dir_.path() / "job-%j.out").string(), "--wrap",
       "srun sh -c 'echo \"node $SLURM_NODEID is $(hostname) at $(getent hosts $(hostname))\"'"},
      jobEnvironment());
  const SlurmRecord done = cluster_->awaitJobState(job, {"COMPLETED", "FAILED"}, 60s);
  ASSERT_EQ(done.count("JobState") ? done.at("JobState") : "", "COMPLETED") << story(job);
  const std::string output = jobOutput(job);
  for (const std::string host : {"h1", "h2"}) {
    const std::regex line("node [01] is " + host + " at " + lab_->address(host) + " +" + host);
    EXPECT_TRUE(std::regex_search(output, line)) << output;
  }
}

// (a) The tutorials' job as it is shipped, shortened through its variables:
// both nodes train as one world of 2 to the last epoch, and Slurm records
// the job COMPLETED with exit code 0:0.
TEST_F(SlurmJobTest, TheShippedSbatchScriptTrainsToTheEndAndExitsZero) {
  const auto submitted = std::chrono::steady_clock::now();
  const int job =
      submitTrainJob({{"TRAIN_EPOCHS", "3"}, {"TRAIN_SAVE_EVERY", "1"}, {"TRAIN_SAMPLES", "2000"}});
  const SlurmRecord done = cluster_->awaitJobState(job, {"COMPLETED", "FAILED", "CANCELLED"}, 180s);
  std::cout << "[ timing   ] sbatch to COMPLETED: "
            << std::chrono::duration_cast<std::chrono::milliseconds>(
                   std::chrono::steady_clock::now() - submitted)
                   .count()
            << " ms" << std::endl;
  ASSERT_EQ(done.count("JobState") ? done.at("JobState") : "", "COMPLETED") << story(job);
  std::optional<SlurmRecord> recorded;
  ASSERT_TRUE(test_support::eventually(
      [&] { return (recorded = cluster_->completion(job)).has_value(); }, 10s))
      << story(job);
  EXPECT_EQ(recorded->at("JobState"), "COMPLETED");
  EXPECT_EQ(recorded->at("ExitCode"), "0:0");
  const std::string output = jobOutput(job);
  EXPECT_TRUE(output.find("train: task autoencoder, 2000 samples, world 2 (gloo)") !=
              std::string::npos)
      << output;
  EXPECT_TRUE(output.find("epoch 2/3 | loss") != std::string::npos) << output;
  EXPECT_EQ(snapshotEpochs(), 3) << output;
  // No rendezvous flag nor interface in the script: each ddprun derived them.
  const std::string derived = "Slurm job " + std::to_string(job) + " step 0: 2 nodes";
  EXPECT_EQ(countOf(output, derived), 2) << output;
  EXPECT_EQ(countOf(output, "the workers get GLOO_SOCKET_IFNAME="), 2) << output;
}

// (b) A worker that exits 3 (a code a job may use for "requeue me"): its
// ddprun exits 3, srun and the batch script pass it on, and Slurm records
// the job FAILED with exit code 3:0.
TEST_F(SlurmJobTest, AWorkerExitingThreeIsRecordedAsExitThree) {
  const int job = submitTrainJob(
      {{"TRAIN_EPOCHS", "3"}, {"TRAIN_SAMPLES", "2000"}}, {},
      {"--fail-at-epoch", "1", "--fail-rank", "1", "--fail-mode", "exit", "--fail-exit-code", "3"});
  const SlurmRecord done = cluster_->awaitJobState(job, {"COMPLETED", "FAILED", "CANCELLED"}, 180s);
  ASSERT_EQ(done.count("JobState") ? done.at("JobState") : "", "FAILED") << story(job);
  EXPECT_EQ(done.at("ExitCode"), "3:0") << story(job);
  std::optional<SlurmRecord> recorded;
  ASSERT_TRUE(test_support::eventually(
      [&] { return (recorded = cluster_->completion(job)).has_value(); }, 10s))
      << story(job);
  EXPECT_EQ(recorded->at("JobState"), "FAILED");
  EXPECT_EQ(recorded->at("ExitCode"), "3:0") << story(job);
  const std::string output = jobOutput(job);
  EXPECT_TRUE(output.find("injected failure at epoch 1 on rank 1") != std::string::npos) << output;
  EXPECT_TRUE(output.find("Exited with exit code 3") != std::string::npos) << output;
}

// Training long enough for a test to act on it mid-way: a snapshot every
// epoch, and epochs of about a second here.
const Variables kLongTraining = {
    {"TRAIN_EPOCHS", "300"}, {"TRAIN_SAVE_EVERY", "1"}, {"TRAIN_SAMPLES", "3000"}};

// (c) scancel mid-training: Slurm sends SIGTERM to every process of the job
// (ddprun's two, the workers, srun, the batch shell), SIGKILL after
// KillWait (30 s here). ddprun stops its workers and exits 143 on both nodes
// long before that, and nothing of the job is left on either host.
TEST_F(SlurmJobTest, ScancelMidTrainingLeavesNoProcessOnEitherHost) {
  const int job = submitTrainJob(kLongTraining);
  ASSERT_TRUE(outputShows(job, "snapshot saved", 120s)) << story(job);
  const auto cancelled = std::chrono::steady_clock::now();
  ASSERT_EQ(cluster_->client({"scancel", std::to_string(job)}).code, 0);
  std::string left;
  const bool gone = test_support::eventually(
      [&] {
        left = jobProcessesLeft();
        return left.empty();
      },
      std::chrono::seconds(cluster_->layout().kill_wait_s), 20ms);
  const auto took = std::chrono::steady_clock::now() - cancelled;
  std::cout << "[ timing   ] scancel to no process of the job: "
            << std::chrono::duration_cast<std::chrono::milliseconds>(took).count() << " ms"
            << std::endl;
  ASSERT_TRUE(gone) << "still there after KillWait:" << left << story(job);
  // ddprun's grace in train.sbatch is 20 s, Slurm's SIGKILL comes at 30 s:
  // the workers died of the SIGTERM, and ddprun ended on its own.
  EXPECT_LT(took, 20s) << story(job);
  const SlurmRecord done = cluster_->awaitJobState(job, {"CANCELLED"}, 30s);
  EXPECT_EQ(done.count("JobState") ? done.at("JobState") : "", "CANCELLED") << story(job);
  EXPECT_EQ(done.count("ExitCode") ? done.at("ExitCode") : "", "0:15") << story(job);
  ASSERT_TRUE(outputShows(job, "task 1: Exited with exit code 143", 10s)) << story(job);
  const std::string output = jobOutput(job);
  std::size_t interrupted = 0;
  for (auto at = output.find("ddprun: interrupted by SIGTERM; workers stopped");
       at != std::string::npos; at = output.find("ddprun: interrupted by SIGTERM", at + 1)) {
    ++interrupted;
  }
  EXPECT_EQ(interrupted, 2u) << output;
  EXPECT_TRUE(output.find("task 0: Exited with exit code 143") != std::string::npos) << output;
}

// (d) scontrol requeue mid-training: the job is stopped as by scancel, queued
// again under the same id, and its second run resumes from the snapshot the
// first one left in the job's directory, then trains to the end.
TEST_F(SlurmJobTest, ARequeuedJobResumesFromItsSnapshot) {
  const int job = submitTrainJob(
      {{"TRAIN_EPOCHS", "12"}, {"TRAIN_SAVE_EVERY", "1"}, {"TRAIN_SAMPLES", "3000"}});
  ASSERT_TRUE(test_support::eventually([&] { return snapshotEpochs() >= 2; }, 120s)) << story(job);
  const int before = snapshotEpochs();
  cluster_->requeue(job);
  const SlurmRecord done = cluster_->awaitJobState(job, {"COMPLETED", "FAILED", "CANCELLED"}, 240s);
  ASSERT_EQ(done.count("JobState") ? done.at("JobState") : "", "COMPLETED") << story(job);
  EXPECT_EQ(done.at("Restarts"), "1");
  EXPECT_EQ(done.at("ExitCode"), "0:0");
  EXPECT_EQ(snapshotEpochs(), 12);
  // --open-mode=append (train.sbatch): both runs' output in one file, the
  // second told SLURM_RESTART_COUNT=1.
  std::smatch resumed;
  const std::string output = jobOutput(job);
  const std::string run = "job " + std::to_string(job) + ", run ";
  EXPECT_TRUE(output.find(run + "1, nodes h[1-2]") != std::string::npos) << output;
  EXPECT_TRUE(output.find(run + "2, nodes h[1-2]") != std::string::npos) << output;
  ASSERT_TRUE(std::regex_search(
      output, resumed, std::regex("train: resuming from " + snapshot() + " after epoch ([0-9]+)")))
      << output;
  EXPECT_GE(std::stoi(resumed[1].str()), before) << output;
  EXPECT_LT(std::stoi(resumed[1].str()), 12) << output;
}

// (e) The warning before the time limit (sbatch --signal=USR1@55 with a one
// minute limit; train.sbatch asks for USR1@60): Slurm sends SIGUSR1 to every
// process of the step, each ddprun forwards its copy to its worker too, and
// the workers save one snapshot at the end of the epoch, then train on.
TEST_F(SlurmJobTest, TheWarningSignalMakesTheWorkersSnapshotAndTrainOn) {
  const int job = submitTrainJob(
      {{"TRAIN_EPOCHS", "1000"}, {"TRAIN_SAVE_EVERY", "0"}, {"TRAIN_SAMPLES", "3000"}},
      {"--time=1", "--signal=USR1@55"});
  const std::string asked = "(asked for by SIGUSR1)";
  ASSERT_TRUE(outputShows(job, "snapshot saved to .* \\(asked for by SIGUSR1\\)", 60s))
      << story(job);
  const std::string at_save = jobOutput(job);
  EXPECT_GE(snapshotEpochs(), 1);
  // Two epochs later: still training, and no second snapshot for the copies.
  static const std::regex epoch_line("\nepoch [0-9]+/1000");
  const auto epochsIn = [](const std::string& text) {
    return std::distance(std::sregex_iterator(text.begin(), text.end(), epoch_line),
                         std::sregex_iterator());
  };
  ASSERT_TRUE(test_support::eventually(
      [&] { return epochsIn(jobOutput(job)) >= epochsIn(at_save) + 2; }, 30s))
      << story(job);
  const std::string output = jobOutput(job);
  EXPECT_EQ(output.find(asked), output.rfind(asked)) << "two snapshots for one warning\n" << output;
  std::size_t forwarded = 0;
  for (auto at = output.find(
           "received SIGUSR1: forwarded to local rank(s) [0], which handle it and keep running");
       at != std::string::npos; at = output.find("received SIGUSR1: forwarded", at + 1)) {
    ++forwarded;
  }
  EXPECT_EQ(forwarded, 2u) << "one line per node's ddprun\n" << output;
  EXPECT_EQ(cluster_->showJob(job).at("JobState"), "RUNNING") << story(job);
}

}  // namespace
}  // namespace ddprun::netns_test

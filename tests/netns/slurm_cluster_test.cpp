// ddprun under a real Slurm cluster (SlurmJobTest: munged, slurmctld and a
// slurmd per host in network namespaces): deploy/slurm/train.sbatch runs
// `srun ddprun train` over two nodes, and what Slurm does to a job reaches
// ddprun and its workers as it would on a real cluster: the exit codes Slurm
// records, scancel, requeue, the warning signal before the time limit.
#include <iostream>
#include <regex>

#include "slurm_job_fixture.hpp"

namespace ddprun::netns_test {
namespace {

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
}

}  // namespace
}  // namespace ddprun::netns_test

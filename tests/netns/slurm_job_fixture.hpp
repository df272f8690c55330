// SlurmJobTest: a fresh Slurm cluster per test on a NetLab: slurmctld (and
// munged) on host "h0", one slurmd on each of "h1" and "h2", everything in the
// test's temp dir. Jobs are submitted with jobEnvironment(), which puts the
// built ddprun and train first on PATH; deploy/slurm/train.sbatch runs as
// users submit it. Skips only where the test is not root: missing Slurm or
// munge programs, or a lab that cannot be built, fail the test.
//
// Clean-up order: the cluster (every job cancelled, daemons stopped, and the
// test fails if any process had to be killed after that), then the lab, then
// the temp dir. Used by one test thread.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "ddprun/test_support/eventually.hpp"
#include "ddprun/test_support/files.hpp"
#include "ddprun/test_support/temp_dir.hpp"
#include "ddprun/test_support/train_snapshot.hpp"
#include "netns_lab.hpp"
#include "slurm_cluster.hpp"

namespace ddprun::netns_test {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

class SlurmJobTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) {
      GTEST_SKIP() << "the Slurm cluster tests run munged, slurmctld and slurmd as root in "
                      "network namespaces: run them as root";
    }
    lab_.emplace(std::vector<std::string>{"h0", "h1", "h2"});
    cluster_.emplace(*lab_, layout(), dir_.path());
  }

  // The cluster a test gets: h0 the controller, h1 and h2 nodes of 2 CPUs.
  virtual SlurmLayout layout() const { return SlurmLayout{}; }

  void TearDown() override {
    if (!cluster_) {
      return;
    }
    cluster_->stop();
    std::string left;
    for (const HostProcess& process : cluster_->leftovers()) {
      left += "\n  " + std::to_string(process.pid) + " " + process.command;
    }
    EXPECT_TRUE(left.empty()) << "processes left after every job ended and the daemons stopped:"
                              << left;
    keepFilesIfAsked();
  }

  // The environment a user submits from: the built ddprun and train first on
  // PATH, ddprun's logs in the test's dir, and, once, what the workers need
  // on these hosts (below).
  Variables jobEnvironment(const Variables& extra = {}) const {
    const std::string tools = fs::path(DDPRUN_BINARY).parent_path().string() + ":" +
                              fs::path(TRAIN_BINARY).parent_path().string();
    Variables env = {{"PATH", tools + ":" + kChildPath}, {"TMPDIR", dir_.path().string()}};
    // No GLOO_SOCKET_IFNAME: every lab host has the machine's host name,
    // which resolves to loopback, and ddprun names the interface itself.
    env.insert(env.end(), extra.begin(), extra.end());
    return env;
  }

  // deploy/slurm/train.sbatch, as is: `sbatch_args` before it (they win over
  // its #SBATCH lines), `train_args` after it; its output in jobOutput(job).
  // `settings` are its TRAIN_* variables. The snapshot is snapshot().
  int submitTrainJob(const Variables& settings, const std::vector<std::string>& sbatch_args = {},
                     const std::vector<std::string>& train_args = {}) {
    std::vector<std::string> args = {"--chdir=" + dir_.path().string(),
                                     "--output=" + (dir_.path() / "job-%j.out").string()};
    args.insert(args.end(), sbatch_args.begin(), sbatch_args.end());
    args.push_back(SLURM_TRAIN_SCRIPT);
    args.insert(args.end(), train_args.begin(), train_args.end());
    Variables env = settings;
    env.emplace_back("JOB_DIR", jobDir().string());
    return cluster_->submit(args, jobEnvironment(env));
  }

  fs::path jobDir() const { return dir_.path() / "job"; }
  std::string snapshot() const { return (jobDir() / "snapshot.pt").string(); }

  std::string jobOutput(int job) const {
    return test_support::readFile(dir_.path() / ("job-" + std::to_string(job) + ".out"));
  }

  // The job's output and the daemons' logs, for assertion messages.
  std::string story(int job) const {
    return "\n===== job " + std::to_string(job) + " output =====\n" + jobOutput(job) +
           cluster_->diagnostics();
  }

  // Epochs the snapshot holds; -1 if none.
  int snapshotEpochs() const { return test_support::trainSnapshotEpochs(TRAIN_BINARY, snapshot()); }

  // Waits until the job's output matches `pattern`.
  bool outputShows(int job, const std::string& pattern, std::chrono::milliseconds timeout) const {
    const std::regex wanted(pattern);
    return test_support::eventually([&] { return std::regex_search(jobOutput(job), wanted); },
                                    timeout, 50ms);
  }

  // Every process of the job on the compute hosts: none but slurmd's.
  std::string jobProcessesLeft() const {
    std::string left;
    for (const std::string& host : cluster_->layout().nodes) {
      for (const HostProcess& process : cluster_->jobProcesses(host)) {
        left += "\n  " + host + ": " + std::to_string(process.pid) + " " + process.command;
      }
    }
    return left;
  }

 private:
  // DDPRUN_NETNS_KEEP_LOGS=DIR keeps each test's files in DIR/<suite>.<test>.
  void keepFilesIfAsked() {
    const char* keep = std::getenv("DDPRUN_NETNS_KEEP_LOGS");
    if (keep == nullptr || *keep == '\0') {
      return;
    }
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    const fs::path target =
        fs::path(keep) / (std::string(info->test_suite_name()) + "." + info->name());
    std::error_code ignored;
    fs::remove_all(target, ignored);
    fs::create_directories(target, ignored);
    fs::copy(dir_.path(), target, fs::copy_options::recursive, ignored);
  }

 protected:
  test_support::TempDir dir_{"ddprun-slurm-test"};
  std::optional<NetLab> lab_;
  std::optional<SlurmCluster> cluster_;
};

}  // namespace ddprun::netns_test

// rdzv_bench's two measurements, run for each agent count with the launchers
// alternating: the rendezvous latency and the recovery from a lost agent
// (see rdzv_bench.cpp for what each one times).
#pragma once

#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "ddprun/test_support/etcd_cluster.hpp"
#include "ddprun/test_support/temp_dir.hpp"
#include "elastic_job.hpp"
#include "rdzv_report.hpp"

namespace ddprun::bench {

struct RdzvOptions {
  std::vector<int> agents{2, 8, 32, 128};
  std::vector<int> recovery_agents{2, 8};
  int runs = 5;
  int torchrun_max_agents = 32;
  int torchrun_recovery_max_agents = 2;
  double torchrun_recovery_timeout_s = 60.0;
  double timeout_s = 300.0;
  bool skip_torchrun = false;
  bool skip_etcd = false;
  std::string ddprun;
  std::string ddprund;
  std::string worker;
  std::string python;
};

struct RdzvBench {
  RdzvOptions options;
  ElasticPrograms programs;  // programs.python empty: torchrun is not run
  // Started once, shared by every ddprun-etcd run (each its own run id);
  // null: ddprun-etcd is not run, etcd_skipped says why.
  std::unique_ptr<test_support::EtcdCluster> etcd;
  std::string etcd_skipped;
  std::string torch_version;
  test_support::TempDir scratch{"rdzv_bench"};
  int counter = 0;  // numbers the runs' directories
  RdzvReport report;
};

// Both throw JobFailure for a run that went wrong.
void measureRendezvous(RdzvBench& bench);
void measureRecovery(RdzvBench& bench);

// Finds the programs, runs both measurements (progress on stderr) and prints
// the report to `out`. Throws JobFailure for a run that went wrong.
void runRdzvBench(const RdzvOptions& options, std::ostream& out);

}  // namespace ddprun::bench

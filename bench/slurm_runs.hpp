// slurm_bench's measurements: on a real Slurm cluster built in network
// namespaces (tests/netns SlurmCluster: slurmctld and two slurmd nodes of the
// lab, each node with its own host name), the time from `sbatch` to the end
// of the first training step of a two-node job, for
//   - ddprun: deploy/slurm/train.sbatch as shipped (`srun ddprun train
//     --task autoencoder`), and
//   - torchrun: bench/slurm/torchrun.sbatch, Debian's torchrun hand-wired as
//     the tutorials do (`scontrol show hostnames` for the c10d endpoint),
//     running bench/python/ddp_train.py on the same task.
// Both jobs train one epoch of one step (64 images, 32 per rank on 2 ranks),
// so the first line rank 0 prints, "epoch 0/1 | loss ...", comes right after
// the first step; the time it shows up in the job's output is the figure.
// Each batch script first prints a line; from its time on, the figure is
// without Slurm's own scheduling and start of the batch script, which vary
// by up to two seconds from job to job here.
// A third job, `srun` printing that line at once, is Slurm's own floor. One
// job of each runs first, not counted (a fresh cluster's first job and each
// stack's first start are slower), then the three alternate which goes
// first. Needs root. Any failed job
// stops the benchmark with one line naming it and a log that outlives it.
#pragma once

#include <ostream>
#include <string>

namespace ddprun::bench {

struct SlurmBenchOptions {
  int runs = 5;
  double timeout_s = 300.0;
  // slurm_bench's main fills in where this build tree and checkout put these.
  std::string ddprun;
  std::string train;
  std::string ddprun_script;    // deploy/slurm/train.sbatch
  std::string torchrun_script;  // bench/slurm/torchrun.sbatch
  std::string python_script;    // bench/python/ddp_train.py
  std::string python = "/usr/bin/python3";
};

// Runs each job `runs` times (progress on stderr) and prints a Markdown
// table (median, min, max, and the ratio of the medians) to `out`.
void runSlurmBench(const SlurmBenchOptions& options, std::ostream& out);

}  // namespace ddprun::bench

#include "slurm_runs.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <stdexcept>
#include <thread>
#include <vector>

#include "ddprun/test_support/eventually.hpp"
#include "ddprun/test_support/files.hpp"
#include "ddprun/test_support/temp_dir.hpp"
#include "format.hpp"
#include "machine.hpp"
#include "netns_lab.hpp"
#include "slurm_cluster.hpp"

namespace ddprun::bench {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using netns_test::Variables;

// kSlurm: the floor, a two-node `srun` whose node 0 prints the line at once.
enum class Stack { kSlurm, kDdprun, kTorchrun };

const char* nameOf(Stack stack) {
  switch (stack) {
    case Stack::kSlurm:
      return "slurm";
    case Stack::kDdprun:
      return "ddprun";
    case Stack::kTorchrun:
      break;
  }
  return "torchrun";
}

// The first line rank 0 prints: it follows the first (and only) step.
constexpr const char* kFirstStepLine = "epoch 0/1 | loss";
// What each batch script prints first ("job <id>, run 1, nodes ..."): the
// job has started on its first node.
constexpr const char* kScriptLine = ", run 1, nodes ";

struct Sample {
  double script_s = 0;      // sbatch to the batch script's first line
  double first_step_s = 0;  // sbatch to the end of the first step
  double done_s = 0;        // sbatch to the job's end, as scontrol shows it
};

double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const std::size_t middle = values.size() / 2;
  return values.size() % 2 == 1 ? values[middle] : (values[middle - 1] + values[middle]) / 2;
}

// The cluster (root, namespaces, Slurm's daemons) and one job per call.
// Owns the scratch directory, kept when a run fails. Used by one thread.
class SlurmRuns {
 public:
  explicit SlurmRuns(const SlurmBenchOptions& options)
      : options_(options), lab_(std::vector<std::string>{"h0", "h1", "h2"}) {
    netns_test::SlurmLayout layout;
    // torchrun's c10d tells the node hosting its endpoint by host name, and
    // gives the workers node 0's host name as MASTER_ADDR: on the machine's
    // shared name it would do neither.
    layout.own_hostnames = true;
    cluster_.emplace(lab_, layout, dir_.path());
  }

  // One job; `index` from 0, or -1 for the warm-up.
  Sample run(Stack stack, int index) {
    const fs::path run_dir =
        dir_.path() / (std::string(nameOf(stack)) + "-" +
                       (index < 0 ? std::string("warmup") : std::to_string(index + 1)));
    fs::create_directories(run_dir);
    const fs::path output = run_dir / "job.out";
    if (!cluster_->awaitIdle(std::chrono::seconds(60))) {
      fail(stack, index, "the cluster was not idle within 60 s", output);
    }
    const auto submitted = Clock::now();
    const int job =
        cluster_->submit(sbatchArgs(stack, run_dir, output), environment(stack, run_dir));
    const auto deadline = std::chrono::milliseconds(static_cast<long>(options_.timeout_s * 1000));
    Sample sample;
    if (!test_support::eventually(
            [&] {
              const std::string text = test_support::readFile(output);
              if (sample.script_s == 0 && text.find(kScriptLine) != std::string::npos) {
                sample.script_s = secondsSince(submitted);
              }
              return text.find(kFirstStepLine) != std::string::npos;
            },
            deadline, std::chrono::milliseconds(5))) {
      fail(stack, index, "no first step within the timeout", output);
    }
    sample.first_step_s = secondsSince(submitted);
    if (sample.script_s == 0) {
      fail(stack, index, "the batch script never said it started", output);
    }
    const netns_test::SlurmRecord done =
        cluster_->awaitJobState(job, {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"}, deadline);
    sample.done_s = secondsSince(submitted);
    const auto state = done.find("JobState");
    if (state == done.end() || state->second != "COMPLETED") {
      fail(stack, index,
           "the job ended " + (state == done.end() ? std::string("unseen") : state->second),
           output);
    }
    return sample;
  }

 private:
  std::vector<std::string> sbatchArgs(Stack stack, const fs::path& run_dir,
                                      const fs::path& output) const {
    std::vector<std::string> args = {"--chdir=" + run_dir.string(), "--output=" + output.string()};
    switch (stack) {
      case Stack::kSlurm:
        args.insert(args.end(),
                    {"--nodes=2", "--ntasks-per-node=1", "--wrap",
                     "echo \"job $SLURM_JOB_ID, run 1, nodes $SLURM_JOB_NODELIST\"; srun sh -c '[ "
                     "\"$SLURM_NODEID\" != 0 ] || echo \"" +
                         std::string(kFirstStepLine) + " 0\"'"});
        break;
      case Stack::kDdprun:
        args.push_back(options_.ddprun_script);
        break;
      case Stack::kTorchrun:
        args.push_back(options_.torchrun_script);
        break;
    }
    return args;
  }

  Variables environment(Stack stack, const fs::path& run_dir) const {
    const std::string tools = fs::path(options_.ddprun).parent_path().string() + ":" +
                              fs::path(options_.train).parent_path().string();
    Variables env = {{"PATH", tools + ":" + netns_test::kChildPath},
                     {"TMPDIR", run_dir.string()},
                     {"TRAIN_EPOCHS", "1"},
                     {"TRAIN_SAMPLES", "64"},
                     {"TRAIN_BATCH_SIZE", "32"}};
    if (stack == Stack::kDdprun) {
      env.emplace_back("JOB_DIR", (run_dir / "job").string());
    } else if (stack == Stack::kTorchrun) {
      env.emplace_back("DDP_SCRIPT", options_.python_script);
      env.emplace_back("TORCH_PYTHON", options_.python);
    }
    return env;
  }

  [[noreturn]] void fail(Stack stack, int index, const std::string& why, const fs::path& output) {
    dir_.keep();
    throw std::runtime_error(std::string(nameOf(stack)) + " run " +
                             (index < 0 ? std::string("(warm-up)") : std::to_string(index + 1)) +
                             ": " + why + "; the job's output is " + output.string() +
                             ", the cluster's logs are under " + (dir_.path() / "slurm").string());
  }

  const SlurmBenchOptions& options_;
  test_support::TempDir dir_{"ddprun-slurm-bench"};
  netns_test::NetLab lab_;
  std::optional<netns_test::SlurmCluster> cluster_;
};

// Each stack's samples, in the order they ran.
struct Samples {
  std::vector<double> first_step;
  std::vector<double> from_script;  // the batch script's first line to the first step
  std::vector<double> done;
};

std::string spread(const std::vector<double>& values) {
  return formatNumber("%.2f", median(values)) + " (" +
         formatNumber("%.2f", *std::min_element(values.begin(), values.end())) + "–" +
         formatNumber("%.2f", *std::max_element(values.begin(), values.end())) + ")";
}

void printRow(std::ostream& out, const std::string& name, const Samples& samples) {
  out << "| " << name << " | " << spread(samples.first_step) << " | " << spread(samples.from_script)
      << " | " << formatNumber("%.2f", median(samples.done)) << " |\n";
}

void printTable(std::ostream& out, const SlurmBenchOptions& options, const Samples& slurm,
                const Samples& ddprun, const Samples& torchrun, double other_cores) {
  out << "sbatch to the end of the first training step, 2 nodes x 1 worker, " << options.runs
      << " runs each, seconds: median (min–max)\n\n"
      << "| job | sbatch to first step | batch script's start to first step | sbatch to "
         "job done (median) |\n"
      << "|---|---|---|---|\n";
  printRow(out, "Slurm alone: `srun sh -c 'echo ...'` (node 0 prints the line at once)", slurm);
  printRow(out, "ddprun: `srun ddprun train` (deploy/slurm/train.sbatch)", ddprun);
  printRow(out,
           "torchrun: `srun python3 -m torch.distributed.run ddp_train.py` "
           "(bench/slurm/torchrun.sbatch)",
           torchrun);
  out << "\ntorchrun / ddprun, median to the first step: "
      << formatNumber("%.2f", median(torchrun.first_step) / median(ddprun.first_step)) << "x; "
      << "from the batch script's start, past Slurm's scheduling: "
      << formatNumber("%.2f", median(torchrun.from_script) / median(ddprun.from_script)) << "x\n"
      << "\nOther processes kept " << formatNumber("%.2f", other_cores) << " of "
      << std::thread::hardware_concurrency() << " CPUs busy on average meanwhile.\n";
}

}  // namespace

void runSlurmBench(const SlurmBenchOptions& options, std::ostream& out) {
  if (::geteuid() != 0) {
    throw std::runtime_error(
        "slurm_bench runs munged, slurmctld and slurmd as root in network namespaces: run it as "
        "root");
  }
  SlurmRuns runs(options);
  const OtherCpu other;
  // A fresh cluster's first job, and each stack's first start (files not yet
  // in the page cache), are slower: one job of each, not counted.
  for (const Stack stack : {Stack::kSlurm, Stack::kDdprun, Stack::kTorchrun}) {
    const Sample warmup = runs.run(stack, -1);
    std::cerr << nameOf(stack) << " warm-up: first step after "
              << formatNumber("%.2f", warmup.first_step_s) << " s (not counted)" << std::endl;
  }
  Samples slurm, ddprun, torchrun;
  for (int index = 0; index < options.runs; ++index) {
    // Alternate which goes first, so other load falls on each alike.
    std::vector<Stack> order = {Stack::kSlurm, Stack::kDdprun, Stack::kTorchrun};
    std::rotate(order.begin(), order.begin() + index % 3, order.end());
    for (const Stack stack : order) {
      const Sample sample = runs.run(stack, index);
      std::cerr << nameOf(stack) << " run " << index + 1 << ": batch script started after "
                << formatNumber("%.2f", sample.script_s) << " s, first step after "
                << formatNumber("%.2f", sample.first_step_s) << " s, job done after "
                << formatNumber("%.2f", sample.done_s) << " s" << std::endl;
      Samples& into = stack == Stack::kSlurm ? slurm : stack == Stack::kDdprun ? ddprun : torchrun;
      into.first_step.push_back(sample.first_step_s);
      into.from_script.push_back(sample.first_step_s - sample.script_s);
      into.done.push_back(sample.done_s);
    }
  }
  printTable(out, options, slurm, ddprun, torchrun, other.cores());
}

}  // namespace ddprun::bench

// train_bench: the C++ trainer (worker/train) under ddprun against the same
// training in Python (bench/python/ddp_train.py) under torchrun, side by side
// in one run, printed as a Markdown table of training throughput per task.
//
// Both pairs get the same task, data, model, batch size, epochs and one
// intra-op thread per rank on two ranks; each trainer's rank 0 times its own
// training epochs and prints a `throughput:` line (the train contract), which
// is what the table compares. The two pairs alternate which goes first, so
// other load on the machine falls on both alike. Any failed run stops the
// benchmark with one line naming the run and a log that outlives it.

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <exception>
#include <filesystem>
#include <iostream>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "child_process.hpp"
#include "launch_report.hpp"
#include "launcher_process.hpp"
#include "python_workers.hpp"
#include "train_report.hpp"

namespace bench = ddprun::bench;
namespace fs = std::filesystem;
using bench::LauncherProcess;
using Clock = LauncherProcess::Clock;

namespace {

constexpr int kNproc = 2;  // ranks per run: the machine's two cores, one thread each

struct BenchOptions {
  int runs = 3;
  int epochs = 5;
  int batch_size = 32;
  std::vector<std::string> tasks{"mlp", "fmnist"};
  std::optional<int> samples;  // unset: each trainer's own default for the task
  std::string loader = "dataloader";
  double timeout_s = 900.0;
  // Where this build tree puts them; the flags override.
#ifdef DDPRUN_BENCH_TRAIN_PATH
  std::string train = DDPRUN_BENCH_TRAIN_PATH;
#else
  std::string train;  // configured without LibTorch: only --train says where one is
#endif
  std::string ddprun = DDPRUN_BENCH_DDPRUN_PATH;
  std::string script = DDPRUN_BENCH_PYTHON_SCRIPT;
  std::string python;  // empty: found at run time
};

enum class Pair { Ddprun, Torchrun };

const char* nameOf(Pair pair) { return pair == Pair::Ddprun ? "ddprun+train" : "torchrun+python"; }

struct Setup {
  BenchOptions options;
  std::string torch_version;
  bench::TempDir scratch{"train_bench"};
  std::vector<std::string> base_env;
  int run_counter = 0;
};

struct RunResult {
  bench::Throughput throughput;
  double wall_s = 0.0;  // launcher started -> launcher exited
};

// The trainer flags both pairs get, so they train exactly the same thing.
std::vector<std::string> trainerArgs(const BenchOptions& options, const std::string& task) {
  std::vector<std::string> args{"--task", task, "--threads", "1"};
  args.insert(args.end(), {"--total-epochs", std::to_string(options.epochs)});
  args.insert(args.end(), {"--batch-size", std::to_string(options.batch_size)});
  if (options.samples) {
    args.insert(args.end(), {"--samples", std::to_string(*options.samples)});
  }
  return args;
}

std::vector<std::string> launcherArgv(const Setup& setup, Pair pair, const std::string& task,
                                      const fs::path& dir) {
  const BenchOptions& options = setup.options;
  const std::string nproc = std::to_string(kNproc);
  std::vector<std::string> argv;
  if (pair == Pair::Ddprun) {
    argv = {options.ddprun, "--standalone", "--nproc-per-node", nproc, options.train};
  } else {
    // Debian's 1.13 crashes at start without -r/-t (a map naming no rank
    // leaves every stream on the console); 0.1 s is torchrun 2.x's monitor
    // interval (1.13's 5 s would only pad the wall-clock figure).
    argv = {options.python, "-m", "torch.distributed.run", "--standalone"};
    argv.insert(argv.end(), {"--nproc_per_node", nproc, "--monitor_interval", "0.1"});
    argv.insert(argv.end(), {"-r", "9:1", "-t", "9:1", options.script});
  }
  const auto args = trainerArgs(options, task);
  argv.insert(argv.end(), args.begin(), args.end());
  if (pair == Pair::Ddprun) {
    // A fresh directory per run, so no run resumes from another's snapshot.
    argv.insert(argv.end(), {"--snapshot-path", (dir / "snapshot.pt").string()});
  } else {
    argv.insert(argv.end(), {"--loader", options.loader});
  }
  return argv;
}

// A copy of a failed run's log outside the scratch directory, which goes away.
fs::path keepLog(const fs::path& log, const std::string& name) {
  const fs::path kept =
      fs::temp_directory_path() / ("train_bench." + std::to_string(::getpid()) + "." + name);
  std::error_code error;
  fs::copy_file(log, kept, fs::copy_options::overwrite_existing, error);
  return error ? log : kept;
}

RunResult runOnce(Setup& setup, Pair pair, const std::string& task, int run) {
  const std::string name = task + "." + (pair == Pair::Ddprun ? "ddprun" : "torchrun") + "." +
                           std::to_string(++setup.run_counter);
  const fs::path dir = setup.scratch.path() / name;
  fs::create_directory(dir);
  bench::LaunchSpec spec;
  spec.argv = launcherArgv(setup, pair, task, dir);
  spec.env = setup.base_env;
  spec.env.push_back("OMP_NUM_THREADS=1");
  spec.env.push_back("PYTHON_EXEC=" + setup.options.python);
  spec.env.push_back("TMPDIR=" + dir.string());  // the launchers' log dirs go away with it
  spec.log = dir / "launcher.log";
  const std::string what = task + ", " + nameOf(pair) + ", run " + std::to_string(run + 1);
  // main prints it as the one error line.
  auto fail = [&](const std::string& why) {
    return std::runtime_error(what + " " + why +
                              "; log: " + keepLog(spec.log, name + ".log").string());
  };

  LauncherProcess process(spec);
  const auto deadline =
      Clock::now() + std::chrono::milliseconds(static_cast<long>(setup.options.timeout_s * 1000));
  if (!process.waitExit(deadline)) {
    process.stop(std::chrono::milliseconds(5000));
    std::ostringstream limit;
    limit << setup.options.timeout_s;
    throw fail("still running after " + limit.str() + " s (--timeout)");
  }
  if (!process.succeeded()) {
    throw fail("failed (" + process.describeStatus() + ")");
  }
  const auto throughput = bench::readThroughput(spec.log);
  if (!throughput || throughput->seconds <= 0) {
    throw fail("printed no valid throughput line");
  }
  const double wall = std::chrono::duration<double>(process.exited() - process.started()).count();
  std::cerr << "train_bench: " << what << ": " << static_cast<long>(throughput->perSecond())
            << " samples/s, " << throughput->samples << " samples, whole run " << wall << " s"
            << std::endl;
  return {*throughput, wall};
}

bench::TrainComparison measureTask(Setup& setup, bench::TrainReport& report,
                                   const std::string& task) {
  bench::TrainComparison row;
  row.task = task;
  const bench::OtherCpu other;
  std::int64_t samples[2] = {-1, -1};
  for (int run = 0; run < setup.options.runs; ++run) {
    // Alternate which pair goes first, so neither always meets a cold cache.
    const bool ddprun_first = run % 2 == 0;
    for (Pair pair : {ddprun_first ? Pair::Ddprun : Pair::Torchrun,
                      ddprun_first ? Pair::Torchrun : Pair::Ddprun}) {
      const RunResult result = runOnce(setup, pair, task, run);
      const bool ddprun = pair == Pair::Ddprun;
      (ddprun ? row.ddprun_rate : row.python_rate).add(result.throughput.perSecond());
      (ddprun ? row.ddprun_wall : row.python_wall).add(result.wall_s);
      samples[ddprun ? 0 : 1] = result.throughput.samples;
    }
  }
  row.other_cores = other.cores();
  // The same flags must mean the same work; a mismatch says a trainer strays
  // from the contract (data size, padding or epochs), so the rates differ in kind.
  if (samples[0] != samples[1]) {
    report.notes.push_back(task + ": the trainers disagree on the work: ddprun+train trained " +
                           std::to_string(samples[0]) + " samples, torchrun+python " +
                           std::to_string(samples[1]));
  }
  return row;
}

void addOptions(CLI::App& app, BenchOptions& options) {
  app.add_option("--runs", options.runs, "Runs per pair and task (the table shows the median)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--epochs", options.epochs, "--total-epochs for both trainers")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--batch-size", options.batch_size, "Per-rank batch size for both trainers")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--tasks", options.tasks, "Tasks to run: mlp, fmnist, autoencoder")
      ->delimiter(',')
      ->check(CLI::IsMember({"mlp", "fmnist", "autoencoder"}))
      ->capture_default_str();
  app.add_option("--samples", options.samples,
                 "--samples for both trainers (default: each task's own default)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--loader", options.loader, "The Python trainer's --loader")
      ->check(CLI::IsMember({"dataloader", "tensor"}))
      ->capture_default_str();
  app.add_option("--timeout", options.timeout_s, "Seconds one launcher run may take")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--train", options.train, "The train executable")->capture_default_str();
  app.add_option("--ddprun", options.ddprun, "The ddprun executable")->capture_default_str();
  app.add_option("--python", options.python,
                 "Interpreter for torchrun and the Python trainer (default: the first python3 "
                 "or python on PATH that can import torch)");
  app.add_option("--script", options.script, "The Python trainer")->capture_default_str();
}

// Every program the runs need, checked up front so that a missing one is one
// clear line rather than a failed run.
void findPrograms(Setup& setup) {
  BenchOptions& options = setup.options;
  if (options.train.empty()) {
    throw std::runtime_error("no train here (configure with LibTorch and build it): pass --train");
  }
  auto need = [](const std::string& what, const std::string& path) {
    if (::access(path.c_str(), X_OK) != 0) {
      throw std::runtime_error("no " + what + " at " + path + ": build it or pass --" + what);
    }
  };
  need("train", options.train);
  need("ddprun", options.ddprun);
  if (!fs::exists(options.script)) {
    throw std::runtime_error("no Python trainer at " + options.script + ": pass --script");
  }
  const auto torch = bench::findTorchPython(options.python, setup.scratch.path());
  if (torch.python.empty() || torch.torch_version.empty()) {
    throw std::runtime_error(options.python.empty()
                                 ? "no python3 or python on PATH can import torch: pass --python"
                                 : options.python + " cannot import torch");
  }
  options.python = torch.python;
  setup.torch_version = torch.torch_version;
}

std::string describeSetup(const Setup& setup, const std::string& load_before) {
  const BenchOptions& o = setup.options;
  std::ostringstream out;
  out << kNproc << " ranks per run, one intra-op thread each (--threads 1, OMP_NUM_THREADS=1); "
      << o.epochs << " epochs, batch " << o.batch_size << " per rank, "
      << (o.samples ? std::to_string(*o.samples) + " samples" : std::string("default samples"))
      << "; median of " << o.runs << " runs per pair, alternating which goes first. "
      << "ddprun+train: `" << o.ddprun << " --standalone` running `" << o.train
      << "`. torchrun+python: `" << o.python << " -m torch.distributed.run --standalone` (torch "
      << setup.torch_version << ") running `" << o.script << " --loader " << o.loader
      << "`. Samples/s: rank 0's own figure (global samples, padding included, over its "
         "training epochs only); wall s: launcher start to exit. Ratio: ddprun+train / "
         "torchrun+python. "
      << std::thread::hardware_concurrency() << " CPUs. Before: " << load_before
      << "; after: " << bench::loadAverageText() << ".";
  return out.str();
}

}  // namespace

int main(int argc, char** argv) try {
  BenchOptions options;
  CLI::App app{"Compares ddprun+train with torchrun+python: training throughput per task"};
  addOptions(app, options);
  CLI11_PARSE(app, argc, argv);

  const std::string load_before = bench::loadAverageText();
  Setup setup;
  setup.options = options;
  setup.base_env = bench::launcherBaseEnvironment();
  // The bench decides the threads; a caller's setting must not leak into one pair only.
  std::erase_if(setup.base_env,
                [](std::string_view entry) { return entry.starts_with("OMP_NUM_THREADS="); });
  findPrograms(setup);

  bench::TrainReport report;
  for (const auto& task : setup.options.tasks) {
    report.tasks.push_back(measureTask(setup, report, task));
  }
  report.setup = describeSetup(setup, load_before);
  bench::printTrainReport(std::cout, report);
  return 0;
} catch (const std::exception& error) {
  std::cerr << "train_bench: " << error.what() << '\n';
  return 1;
}

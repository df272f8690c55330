// train_bench's runs: each pair started per task and run, timed to its exit,
// and rank 0's throughput line read from its log (see train_runs.hpp).
#include "train_runs.hpp"

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <iostream>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "child_runs.hpp"
#include "ddprun/test_support/temp_dir.hpp"
#include "launch_report.hpp"
#include "machine.hpp"
#include "python_workers.hpp"
#include "train_report.hpp"

namespace ddprun::bench {
namespace {

namespace fs = std::filesystem;

// The second pair is torchrun+python, or with --progress-cost ddprun+train
// whose workers report no progress.
enum class Pair { Ddprun, Torchrun, DdprunQuiet };

const char* nameOf(Pair pair) {
  switch (pair) {
    case Pair::Ddprun:
      return "ddprun+train";
    case Pair::Torchrun:
      return "torchrun+python";
    case Pair::DdprunQuiet:
      return "ddprun+train, progress off";
  }
  return "?";
}

const char* fileNameOf(Pair pair) {
  return pair == Pair::Ddprun ? "ddprun" : pair == Pair::Torchrun ? "torchrun" : "quiet";
}

struct Setup {
  TrainOptions options;
  std::string torch_version;
  test_support::TempDir scratch{"train_bench"};
  EnvVars base_env;
  int run_counter = 0;
};

struct RunResult {
  Throughput throughput;
  double wall_s = 0.0;  // launcher started -> launcher exited
};

// The trainer flags both pairs get, so they train exactly the same thing.
std::vector<std::string> trainerArgs(const TrainOptions& options, const std::string& task) {
  std::vector<std::string> args{"--task", task, "--threads", "1", "--backend", options.backend};
  args.insert(args.end(), {"--total-epochs", std::to_string(options.epochs)});
  args.insert(args.end(), {"--batch-size", std::to_string(options.batch_size)});
  if (options.samples) {
    args.insert(args.end(), {"--samples", std::to_string(*options.samples)});
  }
  return args;
}

std::vector<std::string> launcherArgv(const Setup& setup, Pair pair, const std::string& task,
                                      const fs::path& dir) {
  const TrainOptions& options = setup.options;
  const std::string& nproc = options.nproc_per_node;
  std::vector<std::string> argv;
  if (pair == Pair::Ddprun) {
    argv = {options.ddprun, "--standalone", "--nproc-per-node", nproc, options.train};
  } else if (pair == Pair::DdprunQuiet) {
    // env execs train in the worker's place: only the start pays for it,
    // not the training epochs that samples/s covers.
    argv = {options.ddprun, "--standalone", "--nproc-per-node",       nproc,        "--no-python",
            "/usr/bin/env", "-u",           "DDPRUN_PROGRESS_EVENTS", options.train};
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
  if (pair != Pair::Torchrun) {
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
  const std::string name =
      task + "." + fileNameOf(pair) + "." + std::to_string(++setup.run_counter);
  const fs::path dir = setup.scratch.path() / name;
  fs::create_directory(dir);
  LaunchSpec spec;
  spec.argv = launcherArgv(setup, pair, task, dir);
  spec.env = setup.base_env;
  spec.env.emplace_back("OMP_NUM_THREADS", "1");
  spec.env.emplace_back("PYTHON_EXEC", setup.options.python);
  spec.env.emplace_back("TMPDIR", dir.string());  // the launchers' log dirs go away with it
  spec.log = dir / "launcher.log";
  const std::string what = task + ", " + nameOf(pair) + ", run " + std::to_string(run + 1);
  // main prints it as the one error line.
  auto fail = [&](const std::string& why) {
    return std::runtime_error(what + " " + why +
                              "; log: " + keepLog(spec.log, name + ".log").string());
  };

  auto [process, started] = startLogged(spec);
  const auto deadline =
      Clock::now() + std::chrono::milliseconds(static_cast<long>(setup.options.timeout_s * 1000));
  const auto exited = waitExit(process, deadline);
  if (!exited) {
    process.stop(std::chrono::milliseconds(5000));
    std::ostringstream limit;
    limit << setup.options.timeout_s;
    throw fail("still running after " + limit.str() + " s (--timeout)");
  }
  if (!succeeded(process)) {
    throw fail("failed (" + describeStatus(process) + ")");
  }
  const auto throughput = readThroughput(spec.log);
  if (!throughput || throughput->seconds <= 0) {
    throw fail("printed no valid throughput line");
  }
  const double wall = std::chrono::duration<double>(*exited - started).count();
  std::cerr << "train_bench: " << what << ": " << static_cast<long>(throughput->perSecond())
            << " samples/s, " << throughput->samples << " samples, whole run " << wall << " s"
            << std::endl;
  return {*throughput, wall};
}

TrainComparison measureTask(Setup& setup, TrainReport& report, const std::string& task) {
  TrainComparison row;
  row.task = task;
  const OtherCpu other;
  std::int64_t samples[2] = {-1, -1};
  const Pair second = setup.options.progress_cost ? Pair::DdprunQuiet : Pair::Torchrun;
  for (int run = 0; run < setup.options.runs; ++run) {
    // Alternate which pair goes first, so neither always meets a cold cache.
    const bool ddprun_first = run % 2 == 0;
    for (Pair pair : {ddprun_first ? Pair::Ddprun : second, ddprun_first ? second : Pair::Ddprun}) {
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
                           std::to_string(samples[0]) + " samples, " + nameOf(second) + " " +
                           std::to_string(samples[1]));
  }
  return row;
}

// Every program the runs need, checked up front so that a missing one is one
// clear line rather than a failed run.
void findPrograms(Setup& setup) {
  TrainOptions& options = setup.options;
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
  if (options.progress_cost) {
    return;  // no Python side to find
  }
  if (!fs::exists(options.script)) {
    throw std::runtime_error("no Python trainer at " + options.script + ": pass --script");
  }
  const auto torch = findTorchPython(options.python, setup.scratch.path());
  if (torch.python.empty() || torch.torch_version.empty()) {
    throw std::runtime_error(options.python.empty()
                                 ? "no python3 or python on PATH can import torch: pass --python"
                                 : options.python + " cannot import torch");
  }
  options.python = torch.python;
  setup.torch_version = torch.torch_version;
}

std::string describeSetup(const Setup& setup, const std::string& load_before) {
  const TrainOptions& o = setup.options;
  std::ostringstream out;
  out << "--nproc-per-node " << o.nproc_per_node << " and --backend " << o.backend
      << " for both pairs, one intra-op thread per rank (--threads 1, OMP_NUM_THREADS=1); "
      << o.epochs << " epochs, batch " << o.batch_size << " per rank, "
      << (o.samples ? std::to_string(*o.samples) + " samples" : std::string("default samples"))
      << "; median of " << o.runs << " runs per pair, alternating which goes first. "
      << "ddprun+train: `" << o.ddprun << " --standalone` running `" << o.train << "`. ";
  if (o.progress_cost) {
    out << "ddprun+train, progress off: the same, the worker run by `env -u "
           "DDPRUN_PROGRESS_EVENTS`, so it reports no progress. ";
  } else {
    out << "torchrun+python: `" << o.python << " -m torch.distributed.run --standalone` (torch "
        << setup.torch_version << ") running `" << o.script << " --loader " << o.loader << "`. ";
  }
  out << "Samples/s: rank 0's own figure (global samples, padding included, over its "
         "training epochs only); wall s: launcher start to exit. Ratio: the first pair / the "
         "second. "
      << std::thread::hardware_concurrency() << " CPUs. Before: " << load_before
      << "; after: " << loadAverageText() << ".";
  return out.str();
}

}  // namespace

void runTrainBench(const TrainOptions& options, std::ostream& out) {
  const std::string load_before = loadAverageText();
  Setup setup;
  setup.options = options;
  setup.base_env = launcherBaseEnvironment();
  // The bench decides the threads; a caller's setting must not leak into one pair only.
  std::erase_if(setup.base_env,
                [](const auto& variable) { return variable.first == "OMP_NUM_THREADS"; });
  findPrograms(setup);

  TrainReport report;
  for (const auto& task : setup.options.tasks) {
    report.tasks.push_back(measureTask(setup, report, task));
  }
  report.setup = describeSetup(setup, load_before);
  report.progress_cost = setup.options.progress_cost;
  printTrainReport(out, report);
}

}  // namespace ddprun::bench

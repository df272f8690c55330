// One launch_bench run and what it shares with every run: the launchers
// (ddprun, torchrun, the floor), the workers a variant runs, the benchmark's
// setup, a run started, timed to its exit and its failure noted, and the
// order the launchers take turns in. Used by launch_runs.cpp, on the
// benchmark's one thread.
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "child_runs.hpp"
#include "ddprun/test_support/temp_dir.hpp"
#include "launch_report.hpp"
#include "launch_runs.hpp"
#include "run_files.hpp"

namespace ddprun::bench::launch {

// Floor: what the kernel and a shell allow, `sh` starting the same workers in
// parallel and waiting for them; no launcher can do less and still start them.
enum class Launcher { Ddprun, Torchrun, Floor };

const char* nameOf(Launcher launcher);

// What every worker runs: a Python script through the launcher's interpreter
// path, or a program with --no-python.
struct Workers {
  std::string label;
  bool python = false;
  std::vector<std::string> command;
  // Given as PYTHON_EXEC, or chosen by ddprun itself as when a user sets
  // none: it asks the first python3 on PATH (the benchmark's, put first)
  // whether it finds torch, or uses its kept answer (the probe cache, in the
  // scratch directory: the first run asks), or asks every launch.
  enum class Interpreter { kGiven, kProbed, kProbedEachLaunch } interpreter = Interpreter::kGiven;
};

struct Setup {
  LaunchOptions options;
  std::string python;  // runs the Python workers (and torchrun); empty: none found
  std::string torch_version;
  std::filesystem::path restart_worker;
  std::filesystem::path true_program;
  std::filesystem::path shell;
  test_support::TempDir scratch{"launch_bench"};
  EnvVars base_env;
  int run_counter = 0;
  LaunchReport report;
};

// Runs while the launcher is up; false (with a reason) if the run failed.
using During =
    std::function<bool(launcher::Subprocess&, const std::filesystem::path& dir, Clock::time_point)>;

struct RunResult {
  bool ok = false;
  double ms = 0.0;            // launcher started -> launcher exited
  std::filesystem::path dir;  // the workers' files
  Clock::time_point started;
};

// The launchers measured, and with `floor` the floor after them.
std::vector<Launcher> launchers(const Setup& setup, bool floor);

Samples& samplesOf(Comparison& row, Launcher launcher);

// One run of `launcher` with `workers`, in a directory of its own named
// after `phase`; `during`, if given, runs while the launcher is up.
RunResult runOnce(Setup& setup, Launcher launcher, const Workers& workers, int max_restarts,
                  const std::string& phase, const EnvVars& extra_env = {},
                  const During& during = nullptr);

// Run -1 is the untimed warm-up; `record` gets every timed run's result.
void alternate(const std::vector<Launcher>& order, int runs,
               const std::function<void(Launcher, int run, const RunResult&)>& record,
               const std::function<RunResult(Launcher, int run)>& one);

}  // namespace ddprun::bench::launch

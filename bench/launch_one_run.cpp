// One launch_bench run: the launcher's command line, its environment, and
// its run timed to its exit (launch_one_run.hpp).
#include "launch_one_run.hpp"

#include <chrono>
#include <string>
#include <vector>

namespace ddprun::bench::launch {

namespace fs = std::filesystem;

const char* nameOf(Launcher launcher) {
  switch (launcher) {
    case Launcher::Ddprun:
      return "ddprun";
    case Launcher::Torchrun:
      return "torchrun";
    case Launcher::Floor:
      return "floor";
  }
  return "?";
}

std::vector<Launcher> launchers(const Setup& setup, bool floor) {
  std::vector<Launcher> measured{Launcher::Ddprun};
  if (!setup.options.skip_torchrun && !setup.python.empty() && !setup.torch_version.empty()) {
    measured.push_back(Launcher::Torchrun);
  }
  if (floor) {
    measured.push_back(Launcher::Floor);
  }
  return measured;
}

Samples& samplesOf(Comparison& row, Launcher launcher) {
  switch (launcher) {
    case Launcher::Ddprun:
      return row.ddprun;
    case Launcher::Torchrun:
      return row.torchrun;
    case Launcher::Floor:
      return row.floor;
  }
  return row.ddprun;
}

namespace {

// $1 workers of the command in $2..., in parallel, then the wait for all;
// each has its RANK, as the restart's replacements need.
constexpr char kParallelShell[] =
    "n=$1; shift; while [ \"$n\" -gt 0 ]; do n=$((n - 1)); RANK=$n \"$@\" & done; wait";

// `env` with `dir` put first on its PATH.
void prependToPath(EnvVars& env, const std::string& dir) {
  for (auto& [name, value] : env) {
    if (name == "PATH") {
      value = dir + (value.empty() ? "" : ":" + value);
      return;
    }
  }
  env.emplace_back("PATH", dir);
}

std::vector<std::string> launcherArgv(const Setup& setup, Launcher launcher, const Workers& workers,
                                      int max_restarts) {
  const std::string nproc = std::to_string(setup.options.nproc);
  const std::string restarts = std::to_string(max_restarts);
  std::vector<std::string> argv;
  if (launcher == Launcher::Floor) {
    argv = {setup.shell.string(), "-c", kParallelShell, "sh", nproc};
    if (workers.python) {
      argv.insert(argv.end(), {setup.python, "-u"});  // as ddprun runs a script
    }
  } else if (launcher == Launcher::Ddprun) {
    argv = {setup.options.ddprun, "--standalone"};
    argv.insert(argv.end(), {"--nproc-per-node", nproc, "--max-restarts", restarts});
    if (!workers.python) {
      argv.push_back("--no-python");
    }
  } else {
    argv = {setup.python, "-m", "torch.distributed.run", "--standalone"};
    argv.insert(argv.end(), {"--nproc_per_node", nproc, "--max_restarts", restarts});
    // Debian's 1.13 crashes at start without -r/-t; 0.1 s is torchrun 2.x's
    // default monitor interval (1.13's is 5 s).
    argv.insert(argv.end(), {"--monitor_interval", "0.1", "-r", "9:1", "-t", "9:1"});
    if (!workers.python) {
      argv.push_back("--no_python");
    }
  }
  argv.insert(argv.end(), workers.command.begin(), workers.command.end());
  return argv;
}

void noteFailure(Setup& setup, const std::string& what, const fs::path& log) {
  constexpr std::size_t kMaxNotes = 20;  // a systematic failure should not flood the report
  if (setup.report.notes.size() >= kMaxNotes) {
    return;
  }
  const std::string tail = tailOf(log, 8);  // indented to sit inside the list item
  setup.report.notes.push_back(what + (tail.empty()
                                           ? "; it printed nothing"
                                           : "; its output ended:\n  ```\n" + tail + "  ```"));
}

}  // namespace

RunResult runOnce(Setup& setup, Launcher launcher, const Workers& workers, int max_restarts,
                  const std::string& phase, const EnvVars& extra_env, const During& during) {
  RunResult result;
  result.dir = setup.scratch.path() /
               (phase + "." + nameOf(launcher) + "." + std::to_string(++setup.run_counter));
  fs::create_directory(result.dir);
  LaunchSpec spec;
  spec.argv = launcherArgv(setup, launcher, workers, max_restarts);
  spec.env = setup.base_env;
  if (workers.interpreter == Workers::Interpreter::kGiven) {
    spec.env.emplace_back("PYTHON_EXEC", setup.python);
  } else {
    prependToPath(spec.env, fs::path(setup.python).parent_path().string());
    spec.env.emplace_back("XDG_CACHE_HOME", (setup.scratch / "cache").string());
  }
  if (workers.interpreter == Workers::Interpreter::kProbedEachLaunch) {
    spec.env.emplace_back("DDPRUN_PYTHON_PROBE_CACHE", "0");
  }
  spec.env.emplace_back("LAUNCH_BENCH_DIR", result.dir.string());
  spec.env.emplace_back("TMPDIR", result.dir.string());  // torchrun's log dirs go away with it
  spec.env.insert(spec.env.end(), extra_env.begin(), extra_env.end());
  spec.log = result.dir / "launcher.log";
  const std::string what = std::string(nameOf(launcher)) + ", " + phase + ", " + workers.label;
  auto [process, started] = startLogged(spec);
  const auto deadline =
      Clock::now() + std::chrono::milliseconds(static_cast<long>(setup.options.timeout_s * 1000));
  if (during && !during(process, result.dir, deadline)) {
    process.stop(std::chrono::milliseconds(5000));
    noteFailure(setup, what + ": the workers never got going (" + describeStatus(process) + ")",
                spec.log);
    return result;
  }
  const auto exited = waitExit(process, deadline);
  if (!exited) {
    process.stop(std::chrono::milliseconds(5000));
    noteFailure(setup, what + ": still running after the timeout", spec.log);
    return result;
  }
  if (!succeeded(process)) {
    noteFailure(setup, what + ": " + describeStatus(process), spec.log);
    return result;
  }
  result.ok = true;
  result.started = started;
  result.ms = std::chrono::duration<double, std::milli>(*exited - started).count();
  return result;
}

void alternate(const std::vector<Launcher>& order, int runs,
               const std::function<void(Launcher, int run, const RunResult&)>& record,
               const std::function<RunResult(Launcher, int run)>& one) {
  for (int run = -1; run < runs; ++run) {
    for (Launcher launcher : order) {
      const RunResult result = one(launcher, run);
      if (run >= 0) {
        record(launcher, run, result);
      }
    }
  }
}

}  // namespace ddprun::bench::launch

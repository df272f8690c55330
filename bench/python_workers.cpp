#include "python_workers.hpp"

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <vector>

#include "child_runs.hpp"

namespace ddprun::bench {
namespace {

// restart_worker.cpp's `restart` mode, stamp for stamp; time.monotonic_ns()
// is CLOCK_MONOTONIC. The first line runs after the interpreter has started,
// which is what "the replacement worker runs" means for a Python worker. Every
// wait has a deadline, so an orphan cannot outlive the benchmark for long.
constexpr char kRestartScript[] = R"(import os, signal, sys, time
start = time.monotonic_ns()
folder = os.environ["LAUNCH_BENCH_DIR"]
rank = int(os.environ["RANK"])
world = int(os.environ["WORLD_SIZE"])

def stamp(name, ns):
    with open(os.path.join(folder, name), "w") as f:
        f.write(str(ns))

def wait_until(ready, seconds=60):
    end = time.monotonic() + seconds
    while not ready():
        if time.monotonic() > end:
            os._exit(3)
        time.sleep(0.001)

def on_term(signum, frame):
    stamp(f"term.{rank}", time.monotonic_ns())
    signal.signal(signum, signal.SIG_DFL)  # die of it, as a worker without a handler would
    os.kill(os.getpid(), signum)

if int(os.environ["TORCHELASTIC_RESTART_COUNT"]) > 0:
    stamp(f"start.{rank}", start)
    sys.exit(0)
if rank != 0:  # before up.<rank>, so a SIGTERM right after the crash still leaves its stamp
    signal.signal(signal.SIGTERM, on_term)
stamp(f"up.{rank}", start)
if rank == 0:
    wait_until(lambda: all(os.path.exists(os.path.join(folder, f"up.{r}"))
                           for r in range(1, world)))
    time.sleep(int(os.environ.get("LAUNCH_BENCH_CRASH_DELAY_US", "0")) / 1e6)
    stamp("crash", time.monotonic_ns())
    os._exit(1)

time.sleep(60)
os._exit(3)
)";

void writeFile(const std::filesystem::path& path, const char* text) {
  std::ofstream out(path);
  out << text;
  if (!out) {
    throw std::runtime_error("cannot write " + path.string());
  }
}

std::vector<std::string> interpreterCandidates() {
  std::vector<std::string> found;
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path != nullptr ? path : "");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    for (const char* name : {"python3", "python"}) {
      const auto candidate = std::filesystem::path(dir.empty() ? "." : dir) / name;
      if (::access(candidate.c_str(), X_OK) == 0) {
        found.push_back(candidate.string());
      }
    }
  }
  return found;
}

// torch's version as `python` reports it, or empty if it cannot import torch.
std::string torchVersion(const std::string& python, const std::filesystem::path& scratch) {
  LaunchSpec spec;
  spec.argv = {python, "-c", "import torch; print(torch.__version__)"};
  spec.env = launcher::inheritedEnvironment();
  spec.log = scratch / "torch_probe.log";
  launcher::Subprocess probe = startLogged(spec).process;
  if (!waitExit(probe, Clock::now() + std::chrono::seconds(60)) || !succeeded(probe)) {
    return {};
  }
  // The last line: warnings on stderr, if any, come first.
  std::ifstream in(spec.log);
  std::string line, version;
  while (std::getline(in, line)) {
    if (!line.empty()) {
      version = line;
    }
  }
  return version.empty() ? "unknown" : version;
}

}  // namespace

TorchPython findTorchPython(const std::string& requested, const std::filesystem::path& scratch) {
  if (!requested.empty()) {
    return {requested, torchVersion(requested, scratch)};
  }
  for (const auto& candidate : interpreterCandidates()) {
    if (auto version = torchVersion(candidate, scratch); !version.empty()) {
      return {candidate, version};
    }
  }
  return {};
}

WorkerScripts writeWorkerScripts(const std::filesystem::path& dir) {
  WorkerScripts scripts{dir / "noop_worker.py", dir / "restart_worker.py"};
  writeFile(scripts.noop, "import sys\n");
  writeFile(scripts.restart, kRestartScript);
  return scripts;
}

}  // namespace ddprun::bench

// spawn_bench: what one worker's start costs the agent, apart from all else
// a launch does. The agent's own way (launcher::Subprocess, as spawnWorker
// uses it: into a cgroup, with a death signal, its output on a pipe) against
// the floor, glibc's posix_spawn of the same program, each timed from the
// call to its return (the child has exec'd: both wait for that) and, for
// the N-worker group, to the last child's exit. The process is made to look
// like an agent first: threads running and some megabytes of heap touched,
// since what a fork costs grows with both.
//
//   spawn_bench [--runs N] [--nproc N] [--heap-mib M] [--cgroup DIR]
//
// Prints one Markdown table: median and p90 per spawn and per group, and
// the agent's multiple of the floor.
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <cstring>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "ddprun/launcher/process/executable_path.hpp"
#include "ddprun/launcher/process/subprocess.hpp"
#include "elapsed.hpp"
#include "format.hpp"
#include "launch_report.hpp"

namespace bench = ddprun::bench;
namespace launcher = ddprun::launcher;

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  int runs = 200;
  int nproc = 4;
  int heap_mib = 8;
  std::string cgroup;  // an existing cgroup v2 directory; empty: none
};

// Threads that sleep in a futex wait, as the agent's loop and helpers do,
// and heap that is written, as the agent's is.
class AgentLikeProcess {
 public:
  explicit AgentLikeProcess(int heap_mib) : heap_(static_cast<std::size_t>(heap_mib) << 20) {
    std::memset(heap_.data(), 1, heap_.size());
    for (int i = 0; i < 3; ++i) {
      threads_.emplace_back([this] {
        while (!stop_.load()) {
          stop_.wait(false);
        }
      });
    }
  }
  ~AgentLikeProcess() {
    stop_.store(true);
    stop_.notify_all();
    for (auto& thread : threads_) {
      thread.join();
    }
  }
  AgentLikeProcess(const AgentLikeProcess&) = delete;
  AgentLikeProcess& operator=(const AgentLikeProcess&) = delete;

 private:
  std::vector<char> heap_;
  std::atomic<bool> stop_{false};
  std::vector<std::thread> threads_;
};

struct Timings {
  bench::Samples per_spawn;
  bench::Samples per_group;
};

// N children of `program`, the agent's way; returns when all have exited.
void groupBySubprocess(const Options& options, const std::string& program, int cgroup_fd,
                       int output_fd, Timings& timings) {
  const auto start = Clock::now();
  std::vector<std::unique_ptr<launcher::Subprocess>> children;
  for (int i = 0; i < options.nproc; ++i) {
    launcher::SpawnOptions spawn;
    spawn.argv = {program};
    spawn.env = {{"PATH", "/usr/bin:/bin"}};
    spawn.stdout_fd = spawn.stderr_fd = output_fd;
    spawn.cgroup_fd = cgroup_fd;
    const auto one = Clock::now();
    children.push_back(std::make_unique<launcher::Subprocess>(spawn));
    timings.per_spawn.add(bench::msSince(one));
  }
  for (auto& child : children) {
    child->wait();
  }
  timings.per_group.add(bench::msSince(start));
}

// The same group by posix_spawn (glibc: clone with CLONE_VM | CLONE_VFORK).
void groupByPosixSpawn(const Options& options, const std::string& program, int output_fd,
                       Timings& timings) {
  const auto start = Clock::now();
  std::vector<pid_t> pids;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, output_fd, STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, output_fd, STDERR_FILENO);
  char path_variable[] = "PATH=/usr/bin:/bin";
  char* envp[] = {path_variable, nullptr};
  std::string argv0 = program;
  char* argv[] = {argv0.data(), nullptr};
  for (int i = 0; i < options.nproc; ++i) {
    const auto one = Clock::now();
    pid_t pid = -1;
    if (posix_spawn(&pid, program.c_str(), &actions, nullptr, argv, envp) != 0) {
      throw std::runtime_error("posix_spawn failed");
    }
    timings.per_spawn.add(bench::msSince(one));
    pids.push_back(pid);
  }
  for (const pid_t pid : pids) {
    waitpid(pid, nullptr, 0);
  }
  posix_spawn_file_actions_destroy(&actions);
  timings.per_group.add(bench::msSince(start));
}

void printRow(const char* name, const Timings& t, const Timings& floor) {
  std::cout << "| " << name << " | " << bench::formatNumber("%.3f", t.per_spawn.median()) << " | "
            << bench::formatNumber("%.3f", t.per_spawn.p90()) << " | "
            << bench::formatNumber("%.2f", t.per_group.median()) << " | "
            << bench::formatNumber("%.2f", t.per_group.p90()) << " | "
            << bench::formatNumber("%.2f×", t.per_spawn.median() / floor.per_spawn.median())
            << " |\n";
}

}  // namespace

int main(int argc, char** argv) try {
  Options options;
  CLI::App app{"The agent's worker spawn against posix_spawn, in an agent-like process"};
  app.add_option("--runs", options.runs, "Groups per way")->check(CLI::PositiveNumber);
  app.add_option("--nproc", options.nproc, "Children per group")->check(CLI::PositiveNumber);
  app.add_option("--heap-mib", options.heap_mib, "Heap written before the runs, MiB");
  app.add_option("--cgroup", options.cgroup, "A cgroup v2 directory the agent's way starts in");
  CLI11_PARSE(app, argc, argv);

  const auto found = launcher::findExecutable("true", "/usr/bin:/bin");
  if (!found) {
    throw std::runtime_error("needs /usr/bin/true or /bin/true");
  }
  const std::string& program = *found;
  const int cgroup_fd =
      options.cgroup.empty() ? -1 : ::open(options.cgroup.c_str(), O_RDONLY | O_DIRECTORY);
  const int output_fd = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  const AgentLikeProcess agent_like(options.heap_mib);
  Timings subprocess, posix;
  for (int run = 0; run < options.runs; ++run) {  // alternating: load falls on both alike
    groupBySubprocess(options, program, cgroup_fd, output_fd, subprocess);
    groupByPosixSpawn(options, program, output_fd, posix);
  }
  std::cout << "\n"
            << options.runs << " groups of " << options.nproc << " × `" << program
            << "` each way, alternating; " << options.heap_mib << " MiB of heap written, 3 idle "
            << "threads; the agent's way "
            << (cgroup_fd >= 0 ? "into " + options.cgroup : "with no cgroup") << ".\n\n"
            << "| Way | per spawn, median ms | p90 | group to its last exit, median ms | p90 "
               "| per spawn / floor |\n|---|---:|---:|---:|---:|---:|\n";
  printRow("ddprun (launcher::Subprocess)", subprocess, posix);
  printRow("floor (posix_spawn)", posix, posix);
  return 0;
} catch (const std::exception& error) {
  std::cerr << "spawn_bench: " << error.what() << '\n';
  return 1;
}

// ElasticTest: the fixture of the suites that run several real ddprun agents
// (and ddprund) on loopback with fake workers: launch() starts one agent with
// its output in <tmp>/<name>/agent.log, agent() one agent of job7 with 2 fake
// workers writing their environment and ready files to <tmp>/<name>/. Used by
// one test thread.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "ddprun/launcher/process/subprocess.hpp"
#include "ddprun/test_support/files.hpp"
#include "ddprun/test_support/temp_dir.hpp"

namespace ddprun::launcher::testing {

namespace fs = std::filesystem;
using test_support::readFile;

// Whether `pid` is still a live process (a zombie is not).
inline bool alive(pid_t pid) {
  const std::string stat = readFile("/proc/" + std::to_string(pid) + "/stat");
  const auto close = stat.rfind(')');
  return close != std::string::npos && close + 2 < stat.size() && stat[close + 2] != 'Z';
}

class ElasticTest : public ::testing::Test {
 protected:
  // One ddprun agent with `args`, its environment PATH plus `extra_env`, its
  // output in <tmp>/<name>/agent.log (the directory its workers write to).
  // $TMPDIR, where an agent without --log-dir makes its log directory, is
  // <tmp>/<name> too, so those logs go with the test's directory.
  Subprocess launch(const std::string& name, std::vector<std::string> args,
                    std::vector<std::pair<std::string, std::string>> extra_env = {}) {
    const fs::path dir = dir_.path() / name;
    fs::create_directories(dir);
    SpawnOptions options;
    options.argv = {DDPRUN_BINARY};
    options.argv.insert(options.argv.end(), args.begin(), args.end());
    options.env = {{"PATH", "/usr/bin:/bin"}, {"TMPDIR", dir.string()}};
    options.env.insert(options.env.end(), extra_env.begin(), extra_env.end());
    const int log = ::open((dir / "agent.log").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    options.stdout_fd = log;
    options.stderr_fd = log;
    Subprocess child(options);
    ::close(log);
    return child;
  }

  // One agent of job7 with 2 fake workers writing their environment (and a
  // ready file) to <tmp>/<name>/.
  Subprocess agent(const std::string& name, const std::string& nnodes, std::uint16_t port,
                   std::vector<std::string> worker_args = {},
                   std::vector<std::string> launcher_args = {}) {
    const std::string dir = (dir_.path() / name).string();
    std::vector<std::string> args = {
        "--nnodes",       nnodes, "--nproc-per-node", "2",
        "--rdzv-backend", "c10d", "--rdzv-endpoint",  "127.0.0.1:" + std::to_string(port),
        "--rdzv-id",      "job7"};
    args.insert(args.end(), launcher_args.begin(), launcher_args.end());
    args.insert(args.end(),
                {"--no-python", DDPRUN_FAKE_WORKER, "--env-to", dir, "--ready-to", dir});
    args.insert(args.end(), worker_args.begin(), worker_args.end());
    return launch(name, std::move(args));
  }

  std::map<std::string, std::string> env(const std::string& name, int local_rank) {
    return test_support::readEnvFile(dir_.path() / name / (std::to_string(local_rank) + ".env"));
  }

  std::string log(const std::string& name) { return readFile(dir_.path() / name / "agent.log"); }

  bool ready(const std::string& name) {
    return fs::exists(dir_.path() / name / "0.ready") && fs::exists(dir_.path() / name / "1.ready");
  }

  // The pids the agent's two workers wrote to their ready files.
  std::vector<pid_t> workers(const std::string& name) {
    std::vector<pid_t> pids;
    for (int local_rank : {0, 1}) {
      const std::string text =
          readFile(dir_.path() / name / (std::to_string(local_rank) + ".ready"));
      if (!text.empty()) {
        pids.push_back(std::stoi(text));
      }
    }
    return pids;
  }

  test_support::TempDir dir_{"ddprun-elastic-test"};
};

}  // namespace ddprun::launcher::testing

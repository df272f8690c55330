#include "train_runner.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <sstream>

#include "ddprun/test_support/files.hpp"
#include "ddprun/worker/snapshot.hpp"

namespace ddprun::worker::testing {
namespace {

int openForOutput(const std::filesystem::path& path) {
  return ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
}

}  // namespace

RunOutcome TrainRunner::run(std::vector<std::string> argv, EnvList env) const {
  static std::atomic<int> counter{0};
  const std::string tag = std::to_string(counter++);
  const auto out_path = dir_ / ("stdout." + tag);
  const auto err_path = dir_ / ("stderr." + tag);
  launcher::SpawnOptions options;
  options.argv = std::move(argv);
  options.env = std::move(env);
  options.env.emplace_back("PATH", "/usr/bin:/bin");
  // Where ddprun without --log-dir makes its logs: they go with the test's dir.
  options.env.emplace_back("TMPDIR", dir_.string());
  options.stdout_fd = openForOutput(out_path);
  options.stderr_fd = openForOutput(err_path);
  launcher::ExitStatus status;
  {
    launcher::Subprocess child(options);
    ::close(options.stdout_fd);
    ::close(options.stderr_fd);
    status = child.wait();  // bounded by the ctest timeout
  }
  return {status, test_support::readFile(out_path), test_support::readFile(err_path)};
}

RunOutcome TrainRunner::ddprun(int nproc, std::vector<std::string> train_args,
                               std::vector<std::string> launcher_args) const {
  std::vector<std::string> argv = {DDPRUN_BINARY, "--standalone", "--nproc-per-node",
                                   std::to_string(nproc)};
  argv.insert(argv.end(), launcher_args.begin(), launcher_args.end());
  argv.push_back(TRAIN_BINARY);
  argv.insert(argv.end(), train_args.begin(), train_args.end());
  return run(std::move(argv));
}

RunOutcome TrainRunner::trainAlone(std::vector<std::string> train_args, EnvList env) const {
  std::vector<std::string> argv = {TRAIN_BINARY};
  argv.insert(argv.end(), train_args.begin(), train_args.end());
  return run(std::move(argv), std::move(env));
}

Task loadSnapshotInto(const std::string& name, const std::string& path) {
  Task task = makeTask(name, std::nullopt, 12345);
  if (!readSnapshot(path, name, {*task.model, *task.optimizer})) {
    throw std::runtime_error("no snapshot at " + path);
  }
  return task;
}

double maxParameterDifference(Task& a, Task& b) {
  const auto left = a.model->parameters();
  const auto right = b.model->parameters();
  double worst = 0;
  for (size_t i = 0; i < left.size(); ++i) {
    worst = std::max(worst, (left[i] - right[i]).abs().max().item<double>());
  }
  return worst;
}

std::string describe(const RunOutcome& outcome) {
  return outcome.status.describe() + "\n--- stdout:\n" + outcome.stdout_text + "--- stderr:\n" +
         outcome.stderr_text;
}

}  // namespace ddprun::worker::testing

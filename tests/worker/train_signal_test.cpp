// train and the warning a scheduler sends before a time limit: SIGUSR1 asks
// every rank for a snapshot at the end of the current epoch. Slurm signals
// every process of the step (ddprun's two and each worker), and ddprun
// forwards its copy to the workers too: one snapshot, one line, and training
// goes on. And --fail-exit-code, the code a worker asking to be requeued
// exits with.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "ddprun/launcher/process/subprocess.hpp"
#include "ddprun/test_support/eventually.hpp"
#include "ddprun/test_support/files.hpp"
#include "ddprun/test_support/temp_dir.hpp"
#include "ddprun/worker/snapshot.hpp"
#include "train_runner.hpp"

namespace ddprun::worker::testing {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using launcher::Subprocess;
using test_support::readFile;

int countOf(const std::string& text, const std::string& needle) {
  int count = 0;
  for (auto at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) {
    ++count;
  }
  return count;
}

// `root` and all its descendants, as Slurm's proctrack/linuxproc finds a
// step's processes.
std::vector<pid_t> processTree(pid_t root) {
  std::vector<pid_t> tree = {root};
  for (std::size_t next = 0; next < tree.size(); ++next) {
    const fs::path tasks = "/proc/" + std::to_string(tree[next]) + "/task";
    std::error_code ignored;
    for (const auto& task : fs::directory_iterator(tasks, ignored)) {
      std::istringstream children(readFile(task.path() / "children"));
      for (pid_t child = 0; children >> child;) {
        tree.push_back(child);
      }
    }
  }
  return tree;
}

// The highest epoch rank 0 has logged ("epoch N/T | loss ..."), or -1.
int lastEpoch(const std::string& text) {
  static const std::regex line(R"(\nepoch ([0-9]+)/)");
  int last = -1;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), line); it != std::sregex_iterator();
       ++it) {
    last = std::stoi((*it)[1].str());
  }
  return last;
}

class TrainSignalTest : public ::testing::Test {
 protected:
  test_support::TempDir dir_{"ddprun-train-signal-test"};
  TrainRunner runner_{dir_.path()};
};

TEST_F(TrainSignalTest, Usr1ToEveryProcessOfTheJobIsOneSnapshotAndTrainingGoesOn) {
  const std::string snapshot = runner_.snapshot("s.pt");
  launcher::SpawnOptions options;
  options.argv = {DDPRUN_BINARY, "--standalone", "--nproc-per-node",
                  "2",           TRAIN_BINARY,   "--total-epochs",
                  "100000",      "--save-every", "0",
                  "--samples",   "512",          "--snapshot-path",
                  snapshot};
  options.env = {{"PATH", "/usr/bin:/bin"}, {"TMPDIR", dir_.path().string()}};
  const fs::path log = dir_.path() / "log";
  const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  options.stdout_fd = fd;
  options.stderr_fd = fd;
  Subprocess ddprun(options);
  ::close(fd);
  ASSERT_TRUE(test_support::eventually([&] { return lastEpoch(readFile(log)) >= 2; }, 60s))
      << readFile(log);
  for (const pid_t pid : processTree(ddprun.pid())) {
    ::kill(pid, SIGUSR1);
  }
  const std::string asked = "(asked for by SIGUSR1)";
  ASSERT_TRUE(
      test_support::eventually([&] { return readFile(log).find(asked) != std::string::npos; }, 30s))
      << readFile(log);
  // Well past the epoch that saved it, nothing has asked again.
  const int saved_at = lastEpoch(readFile(log));
  ASSERT_TRUE(
      test_support::eventually([&] { return lastEpoch(readFile(log)) >= saved_at + 5; }, 30s))
      << readFile(log);
  EXPECT_FALSE(ddprun.tryWait().has_value()) << readFile(log);
  ddprun.stop(10s);
  const std::string text = readFile(log);
  EXPECT_EQ(countOf(text, asked), 1) << text;
  EXPECT_EQ(countOf(text, "snapshot saved"), 1) << text;  // --save-every 0: no other
  EXPECT_EQ(countOf(text, "received SIGUSR1: forwarded to local rank(s) [0,1], which handle it"), 1)
      << text;
  EXPECT_GE(inspectSnapshot(snapshot).epochs_run, 3);
}

// The code a worker exits with to ask for a requeue reaches ddprun's exit
// status (and Slurm's record of the job) unchanged.
TEST_F(TrainSignalTest, AnInjectedFailureExitsWithTheAskedCode) {
  const auto run =
      runner_.ddprun(2, {"--total-epochs", "3", "--snapshot-path", runner_.snapshot("f.pt"),
                         "--fail-at-epoch", "1", "--fail-rank", "1", "--fail-exit-code", "3"});
  EXPECT_EQ(run.status.shellCode(), 3) << describe(run);
  EXPECT_NE(run.stderr_text.find("injected failure at epoch 1 on rank 1"), std::string::npos)
      << describe(run);
}

}  // namespace
}  // namespace ddprun::worker::testing

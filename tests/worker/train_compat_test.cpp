// train against real PyTorch: our DistributedSampler gives the shards
// PyTorch's own DistributedSampler gives, and train runs unchanged under
// Debian's torchrun (its agent store and its environment).
#include <gtest/gtest.h>
#include <unistd.h>

#include <regex>
#include <sstream>

#include "ddprun/test_support/files.hpp"
#include "ddprun/worker/distributed_sampler.hpp"
#include "ddprun/worker/snapshot.hpp"
#include "train_runner.hpp"

namespace ddprun::worker::testing {
namespace {

// torchrun's --standalone, but on a free port: 1.13's --standalone always
// hosts its store at localhost:29400, so two tests running it at once (ctest
// -j2) met in one store and one of them failed.
std::vector<std::string> torchrunStandalone() {
  return {DDPRUN_TORCH_PYTHON,
          "-m",
          "torch.distributed.run",
          "--nnodes",
          "1",
          "--rdzv_backend",
          "c10d",
          "--rdzv_endpoint",
          "localhost:" + std::to_string(test_support::freeLoopbackPort()),
          "--rdzv_id",
          "train-compat-" + std::to_string(::getpid())};
}

class TrainCompatTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::string(DDPRUN_TORCH_PYTHON).empty()) {
      GTEST_SKIP() << "no Python interpreter that imports torch (install python3-torch)";
    }
  }

  RunOutcome python(const std::string& code) const {
    return runner_.run({DDPRUN_TORCH_PYTHON, "-c", code});
  }

  test_support::TempDir dir_{"ddprun-train-compat"};
  TrainRunner runner_{dir_.path()};
};

std::vector<int64_t> parseIndices(const std::string& text) {
  std::istringstream in(text);
  std::vector<int64_t> indices;
  for (int64_t value = 0; in >> value;) {
    indices.push_back(value);
  }
  return indices;
}

// One Python run prints every case's shards, a line per (case, rank).
TEST_F(TrainCompatTest, SamplerShardsMatchPyTorchsDistributedSampler) {
  struct Case {
    int64_t size;
    int world;
    uint64_t seed;
    int64_t epoch;
  };
  const std::vector<Case> cases = {Case{2048, 4, 0, 0}, Case{2048, 4, 0, 7}, Case{1000, 3, 42, 2},
                                   Case{10, 4, 5, 1}, Case{3, 8, 1, 0}};
  std::ostringstream code;
  code << "from torch.utils.data.distributed import DistributedSampler\n"
       << "for n, w, seed, epoch in [";
  for (const Case& c : cases) {
    code << "(" << c.size << "," << c.world << "," << c.seed << "," << c.epoch << "),";
  }
  code << "]:\n"
       << "  for rank in range(w):\n"
       << "    s = DistributedSampler(range(n), num_replicas=w, rank=rank, shuffle=True, "
          "seed=seed)\n"
       << "    s.set_epoch(epoch)\n"
       << "    print(' '.join(map(str, s)))\n";
  const auto run = python(code.str());
  ASSERT_TRUE(run.status.success()) << describe(run);
  std::istringstream lines(run.stdout_text);
  for (const Case& c : cases) {
    for (int rank = 0; rank < c.world; ++rank) {
      std::string line;
      ASSERT_TRUE(std::getline(lines, line)) << "Python printed too few lines";
      const auto ours = DistributedSampler(c.size, rank, c.world, c.seed).indices(c.epoch);
      const std::vector<int64_t> ours_list(ours.data_ptr<int64_t>(),
                                           ours.data_ptr<int64_t>() + ours.numel());
      EXPECT_EQ(ours_list, parseIndices(line))
          << "size " << c.size << " world " << c.world << " rank " << rank << " seed " << c.seed
          << " epoch " << c.epoch;
    }
  }
}

// Debian's 1.13 torchrun needs -r/-t to start; 9:1 redirects a rank that
// does not exist, so the workers' output stays on the launcher's.
TEST_F(TrainCompatTest, TrainRunsUnderTorchrunAndResumesThere) {
  const std::string path = runner_.snapshot("torchrun.pt");
  auto argv = torchrunStandalone();
  argv.insert(argv.end(), {"--nproc_per_node", "2", "--max_restarts", "1", "-r", "9:1", "-t", "9:1",
                           "--no_python", TRAIN_BINARY});
  argv.insert(argv.end(), {"--total-epochs", "4", "--save-every", "1", "--snapshot-path", path,
                           "--fail-at-epoch", "2", "--fail-rank", "1"});
  const auto run = runner_.run(argv);
  ASSERT_TRUE(run.status.success()) << describe(run);
  const std::string output = run.stdout_text + run.stderr_text;
  EXPECT_NE(output.find("world 2 (gloo)"), std::string::npos) << output;
  EXPECT_NE(output.find("resuming from " + path + " after epoch 2"), std::string::npos) << output;
  EXPECT_EQ(inspectSnapshot(path).epochs_run, 4);
}

std::vector<std::string> epochLosses(const std::string& output) {
  std::vector<std::string> losses;
  const std::regex epoch_line(R"(epoch \d+/\d+ \| loss ([0-9.]+))");
  for (std::sregex_iterator it(output.begin(), output.end(), epoch_line), end; it != end; ++it) {
    losses.push_back((*it)[1].str());
  }
  return losses;
}

// The benchmark's Python peer (PyTorch's own DDP, DistributedSampler and
// nn.Linear, under torchrun) and train (c10d's Reducer, our sampler, under
// ddprun) with the same seed: the same data, initial weights and shards give
// the same global loss every epoch, to the 6 digits both print. Both on Gloo:
// on a GPU node they would otherwise each pick NCCL, if they can.
TEST_F(TrainCompatTest, TrainAndPythonDdpReportTheSameLosses) {
  auto torchrun = torchrunStandalone();
  torchrun.insert(torchrun.end(),
                  {"--nproc_per_node", "2", "-r", "9:1", "-t", "9:1", DDPRUN_PYTHON_DDP_SCRIPT,
                   "--task", "mlp", "--total-epochs", "3", "--threads", "1", "--backend", "gloo"});
  const auto python_run = runner_.run(torchrun, {{"OMP_NUM_THREADS", "1"}});
  ASSERT_TRUE(python_run.status.success()) << describe(python_run);
  const auto train_run =
      runner_.ddprun(2, {"--task", "mlp", "--total-epochs", "3", "--threads", "1", "--backend",
                         "gloo", "--snapshot-path", runner_.snapshot("m.pt")});
  ASSERT_TRUE(train_run.status.success()) << describe(train_run);
  const auto python_losses = epochLosses(python_run.stdout_text + python_run.stderr_text);
  ASSERT_EQ(python_losses.size(), 3u) << python_run.stdout_text << python_run.stderr_text;
  EXPECT_EQ(epochLosses(train_run.stdout_text), python_losses) << train_run.stdout_text;
}

}  // namespace
}  // namespace ddprun::worker::testing

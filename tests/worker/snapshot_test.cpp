// Snapshots: an exact round trip of model, optimiser and generator state; a
// clear one-line error for every kind of bad file; and a write interrupted
// midway never replaces the snapshot already there.
#include "ddprun/worker/snapshot.hpp"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "ddprun/test_support/temp_dir.hpp"
#include "ddprun/worker/tasks.hpp"

namespace ddprun::worker {
namespace {

// One optimiser step on random data, so the optimiser has state to save.
void trainOneStep(Task& task) {
  const auto inputs = torch::rand({8, 20});
  const auto targets = torch::rand({8, 1});
  task.optimizer->zero_grad();
  task.loss(task.model->forward(inputs), targets).backward();
  task.optimizer->step();
}

std::string readBytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

void writeBytes(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

bool sameParameters(Task& a, Task& b) {
  const auto left = a.model->parameters();
  const auto right = b.model->parameters();
  for (size_t i = 0; i < left.size(); ++i) {
    if (!torch::equal(left[i], right[i])) {
      return false;
    }
  }
  return left.size() == right.size();
}

class SnapshotTest : public ::testing::Test {
 protected:
  std::string path() const { return (dir_ / "snapshot.pt").string(); }

  // Saves a trained mlp at 4 epochs; returns the task that was saved.
  Task saveTrained() {
    Task task = makeTask("mlp", std::nullopt, 1);
    trainOneStep(task);
    writeSnapshot(path(), {"mlp", 4, 2, 0, 0}, {*task.model, *task.optimizer});
    return task;
  }

  std::string loadError(const std::string& task_name = "mlp") {
    Task task = makeTask(task_name, std::nullopt, 2);
    try {
      readSnapshot(path(), task_name, {*task.model, *task.optimizer});
    } catch (const SnapshotError& error) {
      return error.what();
    }
    return "<no error>";
  }

  test_support::TempDir dir_{"ddprun-snapshot-test"};
};

TEST_F(SnapshotTest, MissingFileMeansStartFresh) {
  Task task = makeTask("mlp", std::nullopt, 0);
  EXPECT_FALSE(readSnapshot(path(), "mlp", {*task.model, *task.optimizer}).has_value());
}

TEST_F(SnapshotTest, RoundTripRestoresModelOptimiserAndGenerator) {
  Task saved = saveTrained();
  const auto expected_draw = torch::rand({4});  // the generator moved on after the save
  Task loaded = makeTask("mlp", std::nullopt, 99);
  ASSERT_FALSE(sameParameters(saved, loaded));
  const auto header = readSnapshot(path(), "mlp", {*loaded.model, *loaded.optimizer});
  ASSERT_TRUE(header.has_value());
  EXPECT_EQ(header->epochs_run, 4);
  EXPECT_EQ(header->world_size, 2);
  EXPECT_TRUE(sameParameters(saved, loaded));
  EXPECT_TRUE(torch::equal(torch::rand({4}), expected_draw)) << "generator state not restored";
  // The same next step from both proves the momentum buffers came back too.
  torch::manual_seed(5);
  trainOneStep(saved);
  torch::manual_seed(5);
  trainOneStep(loaded);
  EXPECT_TRUE(sameParameters(saved, loaded));
}

TEST_F(SnapshotTest, InspectReadsTheHeaderWithoutAModel) {
  saveTrained();
  const SnapshotHeader header = inspectSnapshot(path());
  EXPECT_EQ(header.task, "mlp");
  EXPECT_EQ(header.epochs_run, 4);
  EXPECT_NE(headerJson(header).find("\"epochs_run\":4"), std::string::npos);
}

TEST_F(SnapshotTest, EveryTruncationIsNamedNotCrashed) {
  saveTrained();
  const std::string whole = readBytes(path());
  for (size_t length :
       {size_t{0}, size_t{5}, size_t{30}, size_t{60}, whole.size() / 2, whole.size() - 1}) {
    writeBytes(path(), whole.substr(0, length));
    const std::string error = loadError();
    EXPECT_NE(error.find(path()), std::string::npos) << length << ": " << error;
    EXPECT_EQ(error.find('\n'), std::string::npos) << error;
    EXPECT_NE(error, "<no error>") << "accepted " << length << " of " << whole.size() << " bytes";
  }
}

TEST_F(SnapshotTest, AFlippedPayloadByteIsCaughtByTheChecksum) {
  saveTrained();
  std::string bytes = readBytes(path());
  bytes[bytes.size() - 100] ^= 0x5a;
  writeBytes(path(), bytes);
  EXPECT_NE(loadError().find("checksum"), std::string::npos) << loadError();
}

TEST_F(SnapshotTest, ATorchSaveArchiveIsNamedAsForeign) {
  writeBytes(path(), std::string("PK\x03\x04", 4) + std::string(200, 'x'));
  EXPECT_NE(loadError().find("torch.save()"), std::string::npos) << loadError();
  writeBytes(path(), "just some text\n");
  EXPECT_NE(loadError().find("not a train snapshot"), std::string::npos) << loadError();
}

// A directory where the snapshot should be is named as one, whether train
// reads, inspects or writes it; it used to be read as an "empty file".
TEST_F(SnapshotTest, ADirectoryIsNamedAsOneNotReadAsAnEmptyFile) {
  std::filesystem::create_directory(path());
  const std::string expected = "snapshot " + path() + ": is a directory, not a snapshot file";
  EXPECT_EQ(loadError(), expected);
  try {
    inspectSnapshot(path());
    ADD_FAILURE() << "inspected a directory";
  } catch (const SnapshotError& error) {
    EXPECT_EQ(error.what(), expected);
  }
  Task task = makeTask("mlp", std::nullopt, 0);
  try {
    writeSnapshot(path(), {"mlp", 1, 1, 0, 0}, {*task.model, *task.optimizer});
    ADD_FAILURE() << "wrote over a directory";
  } catch (const SnapshotError& error) {
    EXPECT_EQ(error.what(), expected);
  }
  EXPECT_FALSE(std::filesystem::exists(path() + ".tmp")) << "left a temporary file";
}

TEST_F(SnapshotTest, ASnapshotOfAnotherTaskIsRefused) {
  saveTrained();
  const std::string error = loadError("fmnist");
  EXPECT_NE(error.find("task 'mlp'"), std::string::npos) << error;
  EXPECT_NE(error.find("--ignore-snapshot"), std::string::npos) << error;
}

// A child process is SIGKILLed halfway through writing a newer snapshot: the
// file on disk must still be the older one, whole.
TEST_F(SnapshotTest, AWriteKilledMidwayLeavesThePreviousSnapshot) {
  saveTrained();
  const std::string before = readBytes(path());
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    Task task = makeTask("mlp", std::nullopt, 3);
    writeSnapshot(path(), {"mlp", 8, 2, 0, 0}, {*task.model, *task.optimizer},
                  [] { ::kill(::getpid(), SIGKILL); });
    ::_exit(0);  // not reached
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  EXPECT_EQ(readBytes(path()), before);
  EXPECT_EQ(inspectSnapshot(path()).epochs_run, 4);
  EXPECT_TRUE(std::filesystem::exists(path() + ".tmp")) << "the torn write went elsewhere";
}

TEST_F(SnapshotTest, AnUnwritableDirectoryIsAOneLineError) {
  Task task = makeTask("mlp", std::nullopt, 0);
  const std::string target = (dir_ / "missing" / "snapshot.pt").string();
  try {
    writeSnapshot(target, {"mlp", 1, 1, 0, 0}, {*task.model, *task.optimizer});
    FAIL() << "wrote into a missing directory";
  } catch (const SnapshotError& error) {
    EXPECT_NE(std::string(error.what()).find(target), std::string::npos) << error.what();
  }
}

}  // namespace
}  // namespace ddprun::worker

// What a `train` snapshot holds, as the worker's own `--inspect-snapshot`
// reads it: the tests that run `train` (netns, Slurm, etcd) check a job's
// progress with it. Stateless; blocks the calling thread while train runs.
#pragma once

#include <string>

namespace ddprun::test_support {

// Epochs the snapshot at `snapshot_path` holds (the "epochs_run" of the header
// `train_binary --inspect-snapshot` prints); -1 if there is none, or it is
// torn. Throws std::runtime_error if the inspection hangs.
int trainSnapshotEpochs(const std::string& train_binary, const std::string& snapshot_path);

}  // namespace ddprun::test_support

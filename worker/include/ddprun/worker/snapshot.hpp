// Training snapshots: the model, the optimiser's state, the epochs run and the
// CPU generator's state, written atomically (temp file, fsync, rename, fsync of
// the directory) so a crash at any instant leaves the previous snapshot or the
// new one, never a torn file.
//
// Layout: one text line "ddprun-train-snapshot 1", one line of JSON (task,
// epochs run, world size, payload size and CRC-32), then the payload, a
// LibTorch serialize archive. The header lets a truncated, corrupt or foreign
// file be named as such in one line instead of failing deep inside LibTorch.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "ddprun/proto/errors.hpp"

namespace ddprun::worker {

class SnapshotError : public Error {
 public:
  using Error::Error;
};

struct SnapshotHeader {
  std::string task;
  int64_t epochs_run = 0;
  int world_size = 0;          // of the run that wrote it; informational
  uint64_t payload_bytes = 0;  // filled in by writeSnapshot
  uint32_t payload_crc32 = 0;  // filled in by writeSnapshot
};

// What a snapshot holds besides its header.
struct TrainingState {
  torch::nn::Module& model;
  torch::optim::Optimizer& optimizer;
  // Where a read snapshot's tensors go, whichever device wrote them, so a
  // snapshot written on a GPU resumes on a CPU and the other way round.
  torch::Device device = torch::kCPU;
};

// Writes `path` atomically. `midway`, if set, runs after half the bytes are
// in the temporary file (fault injection for the torn-write test).
// Throws SnapshotError naming the file on an I/O error.
void writeSnapshot(const std::string& path, SnapshotHeader header, TrainingState state,
                   const std::function<void()>& midway = {});

// Loads `path` into `state` (and the CPU generator), checking the header,
// size, checksum and task first. Returns nullopt if there is no file.
// Throws SnapshotError with one line naming the file and what is wrong.
std::optional<SnapshotHeader> readSnapshot(const std::string& path,
                                           const std::string& expected_task, TrainingState state);

// Throws SnapshotError ("snapshot <path>: is a directory, not a snapshot
// file") when `path` cannot hold a snapshot; read, inspect and write check it
// too, and train checks it before its first epoch.
void checkSnapshotPath(const std::string& path);

// Checks a snapshot's envelope and checksum without loading it.
SnapshotHeader inspectSnapshot(const std::string& path);

// The header as one line of JSON.
std::string headerJson(const SnapshotHeader& header);

}  // namespace ddprun::worker

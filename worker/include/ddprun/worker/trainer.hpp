// The training loop of the tutorials, done properly: resume from the snapshot
// if there is one, train epochs with DDP over the rank's DistributedSampler
// shard, log the global loss (and test accuracy) on rank 0, and snapshot on
// rank 0 every --save-every epochs, at the end, and at the end of an epoch in
// which any rank was asked for one (SIGUSR1, snapshot_signal.hpp). Runs on
// the main thread.
#pragma once

#include <cstdint>
#include <memory>
#include <ostream>

#include "ddprun/proto/errors.hpp"
#include "ddprun/worker/data_parallel.hpp"
#include "ddprun/worker/datasets.hpp"
#include "ddprun/worker/distributed_sampler.hpp"
#include "ddprun/worker/process_group.hpp"
#include "ddprun/worker/tasks.hpp"
#include "ddprun/worker/timeline_events.hpp"
#include "ddprun/worker/train_options.hpp"

namespace ddprun::worker {

// The failure --fail-at-epoch asks for (mode exit): train exits with
// --fail-exit-code.
class InjectedFailure : public Error {
 public:
  InjectedFailure(const std::string& what, int exit_code) : Error(what), exit_code_(exit_code) {}
  int exitCode() const { return exit_code_; }

 private:
  int exit_code_;
};

class SnapshotSignal;

class Trainer {
 public:
  // `log` receives rank 0's progress lines. `snapshot_signal` (borrowed; may
  // be null) is asked at the end of every epoch for a request.
  Trainer(const TrainOptions& options, DistributedContext& context, std::ostream& log,
          SnapshotSignal* snapshot_signal = nullptr);

  // Trains from the snapshot (or from scratch) to --total-epochs.
  void run();

 private:
  struct EpochResult {
    double mean_loss = 0;         // over every rank's samples
    int64_t samples = 0;          // global, padding included
    double seconds = 0;           // wall time of the epoch's steps
    bool snapshot_asked = false;  // by a signal, on any rank
  };

  int64_t resume();
  EpochResult trainEpoch(int64_t epoch);
  void injectFaultIfAsked(int64_t epoch);
  void snapshot(int64_t epochs_run, bool asked);
  bool snapshotDue(int64_t epochs_run) const;
  void logEpoch(int64_t epoch, const EpochResult& result);
  int64_t rankZeroValue(int64_t value);  // rank 0's `value`, on every rank
  bool isRankZero() const { return context_.env.rank == 0; }
  // A collective's tensor lives where the backend wants it (NCCL: the GPU).
  torch::TensorOptions onDevice(torch::ScalarType type) const {
    return torch::TensorOptions().dtype(type).device(context_.device);
  }

  const TrainOptions& options_;
  DistributedContext& context_;
  std::ostream& log_;
  SnapshotSignal* snapshot_signal_;
  TaskData data_;
  Task task_;
  DistributedSampler sampler_;
  std::unique_ptr<DataParallel> parallel_;  // built once the snapshot is loaded
  ProgressReport progress_;
};

}  // namespace ddprun::worker

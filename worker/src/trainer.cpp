#include "ddprun/worker/trainer.hpp"

#include <chrono>
#include <csignal>
#include <iomanip>

#include "ddprun/worker/snapshot.hpp"
#include "ddprun/worker/snapshot_signal.hpp"
#include "ddprun/worker/timeline_events.hpp"

namespace ddprun::worker {
namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// SIGKILL cannot be caught, so the launcher sees exactly what a crash looks like.
[[noreturn]] void killSelf() {
  std::raise(SIGKILL);
  std::abort();  // unreachable
}

}  // namespace

Trainer::Trainer(const TrainOptions& options, DistributedContext& context, std::ostream& log,
                 SnapshotSignal* snapshot_signal)
    : options_(options),
      context_(context),
      log_(log),
      snapshot_signal_(snapshot_signal),
      data_(loadTaskData(options)),
      task_(makeTask(options.task, options.lr, options.seed)),
      sampler_(data_.train.size(), context.env.rank, context.env.world_size, options.seed) {
  // Module::to keeps each parameter (it swaps its data), so the optimiser
  // made with them still holds them.
  task_.model->to(context_.device);
}

void Trainer::run() {
  const int64_t first_epoch = resume();
  // DDP wraps the model only after the snapshot is in it: LibTorch's
  // Module::load swaps the parameters' data, which detaches the Reducer's
  // gradient hooks, and every rank would then silently train on its own
  // gradients. (The tutorials load before wrapping in DDP for the same reason.)
  parallel_ = std::make_unique<DataParallel>(*task_.model, context_.group);
  parallel_->broadcastFromRankZero();
  if (isRankZero()) {
    log_ << "train: task " << task_.name << ", " << data_.train.size() << " samples, world "
         << context_.env.world_size << " (" << context_.backend << "), batch "
         << options_.batch_size << " x " << context_.env.world_size << ", "
         << sampler_.batchesPerEpoch(options_.batch_size) << " steps per epoch" << std::endl;
  }
  if (first_epoch >= options_.total_epochs) {
    if (isRankZero()) {
      log_ << "train: the snapshot already has " << first_epoch << " of " << options_.total_epochs
           << " epochs; nothing to train" << std::endl;
    }
    return;
  }
  int64_t samples = 0;
  double seconds = 0;
  for (int64_t epoch = first_epoch; epoch < options_.total_epochs; ++epoch) {
    injectFaultIfAsked(epoch);
    const EpochResult result = trainEpoch(epoch);
    samples += result.samples;
    seconds += result.seconds;
    logEpoch(epoch, result);
    if (snapshotDue(epoch + 1) || result.snapshot_asked) {
      snapshot(epoch + 1, result.snapshot_asked);
    }
    if (result.snapshot_asked && snapshot_signal_ != nullptr) {
      snapshot_signal_->answered();
    }
  }
  if (isRankZero()) {
    log_ << "throughput: samples=" << samples << " seconds=" << std::fixed << std::setprecision(6)
         << seconds << " samples_per_s=" << std::setprecision(1)
         << static_cast<double>(samples) / seconds << std::defaultfloat << std::endl;
  }
}

// Every rank loads the snapshot itself, then all check they agree with rank 0:
// on several hosts without a shared filesystem they would not, and training
// on would silently mix models.
int64_t Trainer::resume() {
  checkSnapshotPath(options_.snapshot_path);  // also under --ignore-snapshot: it is written later
  int64_t epochs_run = 0;
  // --ignore-snapshot discards what an earlier job left; a restart of this
  // job (attempt > 0) resumes from the snapshot this job wrote.
  if (!options_.ignore_snapshot || context_.env.restart_count > 0) {
    const auto header = readSnapshot(options_.snapshot_path, task_.name,
                                     {*task_.model, *task_.optimizer, context_.device});
    if (header) {
      epochs_run = header->epochs_run;
      reportTimelineEvent({"resumed from snapshot",
                           Clock::now(),
                           std::nullopt,
                           {{"epochs_run", epochs_run}},
                           {{"path", options_.snapshot_path}}});
      if (isRankZero()) {
        log_ << "train: resuming from " << options_.snapshot_path << " after epoch " << epochs_run
             << std::endl;
      }
    }
  }
  const int64_t rank_zero_epochs = rankZeroValue(epochs_run);
  if (rank_zero_epochs != epochs_run) {
    throw SnapshotError("snapshot " + options_.snapshot_path + ": rank " +
                        std::to_string(context_.env.rank) + " sees " + std::to_string(epochs_run) +
                        " epochs run, rank 0 sees " + std::to_string(rank_zero_epochs) +
                        "; every rank must read the same file (a shared filesystem)");
  }
  return epochs_run;
}

Trainer::EpochResult Trainer::trainEpoch(int64_t epoch) {
  const auto start = Clock::now();
  const torch::Tensor indices = sampler_.indices(epoch);
  const int64_t shard = indices.size(0);
  double loss_sum = 0;
  // Steps count across epochs, so a resumed run reports where it is.
  int64_t step = epoch * sampler_.batchesPerEpoch(options_.batch_size);
  for (int64_t begin = 0; begin < shard; begin += options_.batch_size) {
    const auto batch = indices.narrow(0, begin, std::min(options_.batch_size, shard - begin));
    const auto inputs = data_.train.inputs.index_select(0, batch).to(context_.device);
    const auto targets = data_.train.targets.index_select(0, batch).to(context_.device);
    task_.optimizer->zero_grad();
    const auto output = parallel_->forward([&] { return task_.model->forward(inputs); });
    const auto loss = task_.loss(output, targets);
    loss.backward();
    task_.optimizer->step();
    loss_sum += loss.item<double>() * static_cast<double>(batch.size(0));
    progress_.stepDone(++step);
  }
  // One small all-reduce per epoch so rank 0 reports the loss over every
  // rank, and learns whether any rank was asked for a snapshot (a signal may
  // reach some ranks only, or rank 0 after the others).
  const double asked = snapshot_signal_ != nullptr && snapshot_signal_->takeRequest() ? 1 : 0;
  std::vector<at::Tensor> totals{
      torch::tensor({loss_sum, static_cast<double>(shard), asked}, onDevice(torch::kFloat64))};
  context_.group->allreduce(totals)->wait();
  const double global_loss = totals[0][0].item<double>();
  const double global_samples = totals[0][1].item<double>();
  return {global_loss / global_samples, static_cast<int64_t>(global_samples), secondsSince(start),
          totals[0][2].item<double>() > 0};
}

void Trainer::injectFaultIfAsked(int64_t epoch) {
  const FaultInjection& fault = options_.fault;
  if (!fault.at_epoch || *fault.at_epoch != epoch || context_.env.restart_count != 0 ||
      fault.rank != context_.env.rank || fault.mode == FailMode::kKillDuringSave) {
    return;
  }
  std::cerr << "train: rank " << context_.env.rank << ": injected failure ("
            << failModeName(fault.mode) << ") at the start of epoch " << epoch << std::endl;
  if (fault.mode == FailMode::kKill) {
    killSelf();
  }
  throw InjectedFailure("injected failure at epoch " + std::to_string(epoch) + " on rank " +
                            std::to_string(context_.env.rank) + " (--fail-at-epoch)",
                        fault.exit_code);
}

bool Trainer::snapshotDue(int64_t epochs_run) const {
  if (epochs_run == options_.total_epochs) {
    return true;
  }
  return options_.save_every > 0 && epochs_run % options_.save_every == 0;
}

void Trainer::snapshot(int64_t epochs_run, bool asked) {
  if (!isRankZero()) {
    return;
  }
  const FaultInjection& fault = options_.fault;
  std::function<void()> midway;
  if (fault.mode == FailMode::kKillDuringSave && fault.at_epoch && fault.rank == 0 &&
      context_.env.restart_count == 0 && epochs_run > *fault.at_epoch) {
    midway = [] {
      std::cerr << "train: rank 0: injected failure (kill-during-save)" << std::endl;
      killSelf();
    };
  }
  const auto start = Clock::now();
  writeSnapshot(options_.snapshot_path, {task_.name, epochs_run, context_.env.world_size, 0, 0},
                {*task_.model, *task_.optimizer}, midway);
  reportTimelineEvent({"snapshot",
                       start,
                       Clock::now() - start,
                       {{"epoch", epochs_run - 1}, {"epochs_run", epochs_run}},
                       {{"path", options_.snapshot_path}}});
  log_ << "train: epoch " << epochs_run - 1 << " | snapshot saved to " << options_.snapshot_path
       << " in " << std::fixed << std::setprecision(1) << secondsSince(start) * 1000 << " ms"
       << std::defaultfloat << (asked ? " (asked for by SIGUSR1)" : "") << std::endl;
}

void Trainer::logEpoch(int64_t epoch, const EpochResult& result) {
  if (!isRankZero()) {
    return;
  }
  log_ << "epoch " << epoch << "/" << options_.total_epochs << " | loss " << std::fixed
       << std::setprecision(6) << result.mean_loss;
  if (task_.reports_accuracy && data_.test) {
    log_ << " | accuracy " << std::setprecision(2)
         << 100.0 * accuracy(task_.model, *data_.test, context_.device) << "%";
  }
  log_ << " | " << result.samples << " samples in " << std::setprecision(3) << result.seconds
       << " s" << std::defaultfloat << std::endl;
}

int64_t Trainer::rankZeroValue(int64_t value) {
  std::vector<at::Tensor> tensors{torch::tensor({value}, onDevice(torch::kInt64))};
  context_.group->broadcast(tensors)->wait();
  return tensors[0].item<int64_t>();
}

}  // namespace ddprun::worker

#include "ddprun/worker/train_options.hpp"

#include <CLI/CLI.hpp>
#include <iostream>
#include <map>

#include "ddprun/proto/cli_args.hpp"
#include "ddprun/proto/errors.hpp"
#include "ddprun/version.hpp"

namespace ddprun::worker {
namespace {

const std::map<std::string, FailMode> kFailModes = {
    {"exit", FailMode::kExit},
    {"kill", FailMode::kKill},
    {"kill-during-save", FailMode::kKillDuringSave},
};

void addTrainingFlags(CLI::App& app, TrainOptions& options) {
  app.add_option("--task", options.task, "mlp | fmnist | autoencoder")
      ->check(CLI::IsMember({"mlp", "fmnist", "autoencoder"}));
  app.add_option("--total-epochs,--total_epochs", options.total_epochs, "Epochs to train")
      ->check(CLI::PositiveNumber);
  app.add_option("--save-every,--save_every", options.save_every,
                 "Write a snapshot every N epochs (0: only at the end)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--batch-size,--batch_size", options.batch_size, "Batch size per rank")
      ->check(CLI::PositiveNumber);
  app.add_option("--lr", options.lr, "Learning rate (default: mlp 0.01, others 0.001)")
      ->check(CLI::PositiveNumber);
  app.add_option("--seed", options.seed, "Seed for data, model and shuffling");
  app.add_option("--samples", options.samples,
                 "mlp: dataset size (2048); fmnist/autoencoder: first N images (0: all)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--data-dir,--data_dir", options.data_dir, "Fashion-MNIST IDX .gz files");
  app.add_option("--threads", options.threads, "LibTorch intra-op threads (0: default)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--timeout", options.timeout_s, "Store and collective timeout, seconds")
      ->check(CLI::PositiveNumber);
  app.add_option("--backend", options.backend, "auto | gloo | nccl")
      ->check(CLI::IsMember({"auto", "gloo", "nccl"}));
}

void addSnapshotFlags(CLI::App& app, TrainOptions& options) {
  app.add_option("--snapshot-path,--snapshot_path", options.snapshot_path, "Snapshot file");
  app.add_flag("--ignore-snapshot,--ignore_snapshot", options.ignore_snapshot,
               "Start fresh on attempt 0 even if the snapshot exists (restarts still resume)");
  app.add_option("--inspect-snapshot", options.inspect_snapshot,
                 "Check a snapshot, print its header as JSON, and exit");
}

void addFaultFlags(CLI::App& app, TrainOptions& options) {
  app.add_option("--fail-at-epoch,--fail_at_epoch", options.fault.at_epoch,
                 "Fail at the start of this epoch (attempt 0 only; for tests)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--fail-rank,--fail_rank", options.fault.rank, "The rank that fails")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--fail-mode,--fail_mode", options.fault.mode, "exit | kill | kill-during-save")
      ->transform(CLI::CheckedTransformer(kFailModes, CLI::ignore_case));
  app.add_option("--fail-exit-code,--fail_exit_code", options.fault.exit_code,
                 "The failing rank's exit code in mode exit (default 1)")
      ->check(CLI::Range(1, 255));
}

}  // namespace

const char* failModeName(FailMode mode) {
  switch (mode) {
    case FailMode::kExit:
      return "exit";
    case FailMode::kKill:
      return "kill";
    case FailMode::kKillDuringSave:
      return "kill-during-save";
  }
  return "?";
}

std::optional<TrainOptions> parseTrainOptions(const std::vector<std::string>& args) {
  TrainOptions options;
  CLI::App app{"train: LibTorch DDP trainer with snapshots and resume", "train"};
  addTrainingFlags(app, options);
  addSnapshotFlags(app, options);
  addFaultFlags(app, options);
  app.set_version_flag("--version", std::string("train (ddprun) ") + kVersion,
                       "Print train's version and exit");
  // The tutorials' scripts take `total_epochs save_every` as positionals.
  app.add_option("total_epochs", options.total_epochs, "Same as --total-epochs")
      ->check(CLI::PositiveNumber);
  app.add_option("save_every", options.save_every, "Same as --save-every")
      ->check(CLI::NonNegativeNumber);

  try {
    // "--data-dir=" is "" as in argparse, refused, never the next argument
    // (which CLI11 alone would take, leaving a positional to change meaning).
    const std::vector<std::string> read = proto::readAsArgparse(app, args);
    std::vector<std::string> reversed(read.rbegin(), read.rend());
    app.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    std::cout << app.help();
    return std::nullopt;
  } catch (const CLI::CallForVersion& version) {
    std::cout << version.what() << '\n';
    return std::nullopt;
  } catch (const CLI::ParseError& error) {
    throw ConfigError(std::string("bad command line: ") + error.what() + " (see train --help)");
  }
  return options;
}

}  // namespace ddprun::worker

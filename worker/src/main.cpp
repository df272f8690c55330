// train: the tutorials' DDP trainer in C++. Reads its rank and peers from the
// launcher's environment (ddprun or torchrun), trains with snapshots, resumes
// after a restart. Every error ends in one line on stderr and, under a
// launcher, in TORCHELASTIC_ERROR_FILE; exit 2 for bad flags or environment,
// --fail-exit-code for an injected failure, 1 for anything else. SIGUSR1
// asks for a snapshot at the end of the current epoch.
#include <c10/util/Exception.h>
#include <torch/torch.h>

#include <cstdlib>
#include <iostream>

#include "ddprun/proto/env_contract.hpp"
#include "ddprun/worker/c10d_compat.hpp"
#include "ddprun/worker/error_file.hpp"
#include "ddprun/worker/nccl_environment.hpp"
#include "ddprun/worker/process_group.hpp"
#include "ddprun/worker/snapshot.hpp"
#include "ddprun/worker/snapshot_signal.hpp"
#include "ddprun/worker/train_options.hpp"
#include "ddprun/worker/trainer.hpp"
#include "ddprun/worker/training_device.hpp"

namespace {

using ddprun::worker::TrainOptions;

constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;

// Run by hand (no launcher set RANK, WORLD_SIZE or MASTER_ADDR), train is a
// world of one, like the tutorials' single-GPU script.
bool launchedWithoutAgent() {
  for (const char* name : {"RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "LOCAL_RANK"}) {
    if (std::getenv(name) != nullptr) {
      return false;
    }
  }
  return true;
}

int inspect(const std::string& path) {
  std::cout << ddprun::worker::headerJson(ddprun::worker::inspectSnapshot(path)) << std::endl;
  return 0;
}

int fail(const std::string& message, int code) {
  std::cerr << "train: error: " << message << std::endl;
  ddprun::worker::writeErrorFile(message);
  return code;
}

// LibTorch's messages carry a C++ backtrace after the first line.
std::string firstLine(const std::string& text) { return text.substr(0, text.find('\n')); }

// Maps an exception to its one-line report and exit code.
int reportCurrentException() {
  try {
    throw;
  } catch (const ddprun::ConfigError& error) {
    return fail(error.what(), kExitUsage);
  } catch (const ddprun::worker::InjectedFailure& error) {
    return fail(error.what(), error.exitCode());
  } catch (const ddprun::Error& error) {
    return fail(error.what(), kExitFailure);
  } catch (const c10::Error& error) {
    return fail(firstLine(error.what_without_backtrace()), kExitFailure);
  } catch (const std::exception& error) {
    return fail(firstLine(error.what()), kExitFailure);
  }
}

int train(const TrainOptions& options, ddprun::worker::SnapshotSignal& snapshot_signal) {
  if (options.threads > 0) {
    torch::set_num_threads(options.threads);
  }
  const std::chrono::milliseconds timeout = std::chrono::seconds(options.timeout_s);
  const bool alone = launchedWithoutAgent();
  const auto env = alone ? ddprun::proto::WorkerEnv{} : ddprun::proto::fromProcessEnvironment();
  ddprun::worker::noteUnusedGpus(options.backend, env.rank, std::cerr);
  auto context = alone ? ddprun::worker::singleProcessGroup(options.backend, timeout)
                       : ddprun::worker::connectProcessGroup(env, options.backend, timeout);
  try {
    ddprun::worker::Trainer(options, context, std::cout, &snapshot_signal).run();
  } catch (...) {
    // Report and leave while the process group is still up: unwinding it
    // would close this rank's connections first, the other ranks would fail
    // on them at once, and the launcher could take one of them for the root
    // cause. _Exit also skips Gloo's teardown, which may block on peers.
    const int code = reportCurrentException();
    std::cout.flush();
    std::_Exit(code);
  }
  ddprun::worker::c10d_compat::shutdownNccl(context.group, context.backend);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // Before any thread exists: setenv and unsetenv race with readers.
  ddprun::worker::keepOnlyTheNcclVariableLibTorchReads();
  // Then, before LibTorch or Gloo start a thread: they inherit SIGUSR1 blocked.
  ddprun::worker::SnapshotSignal snapshot_signal;
  try {
    const auto options = ddprun::worker::parseTrainOptions({argv + 1, argv + argc});
    if (!options) {
      return 0;
    }
    if (options->inspect_snapshot) {
      return inspect(*options->inspect_snapshot);
    }
    return train(*options, snapshot_signal);
  } catch (...) {
    return reportCurrentException();
  }
}

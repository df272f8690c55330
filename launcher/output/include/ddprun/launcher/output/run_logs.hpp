// Where ddprun's flags send each worker's output and error file
// (docs/torchrun-contract.md §9): the run's log directory, one per agent, and
// per worker and attempt -r/-t/--local-ranks-filter/--log-line-prefix-template.
// Layout: <log dir>/<run id>_<random>/attempt_N/<local_rank>/{stdout.log,
// stderr.log,error.json}; with --log-dir /dev/null, no files at all.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include "ddprun/launcher/core/launch_config.hpp"
#include "ddprun/launcher/core/worker_output.hpp"

namespace ddprun::launcher {

// What mkdtemp(3) fills in after the run id in the run directory's name.
inline constexpr std::string_view kRunDirSuffix = "_XXXXXX";

// Makes this agent's run directory: <log dir>/<run id>_XXXXXX (mkdtemp), so
// that no other run, and no other agent on this host, ever writes into it.
// <log dir> is --log-dir, made if missing, or a fresh ddprun_XXXXXX under
// $TMPDIR. Returns an empty path for --log-dir /dev/null (no files). Throws
// ddprun::Error naming the directory when it cannot be made.
std::filesystem::path runLogDir(const LaunchConfig& config);

// Where each worker's output goes, attempt after attempt, for one agent: the
// first worker of an attempt finds attempt_N/ removed (with any error.json a
// worker left there) and made anew, as torchrun does, so an error file the
// failure report reads was written in this attempt. Copyable (the agent's
// output callback); every copy shares which attempt was prepared last. Used
// on the agent's loop thread.
class RunLogs {
 public:
  RunLogs(const LaunchConfig& config, std::filesystem::path run_dir, std::string hostname);

  WorkerOutput operator()(int local_rank, int rank, int attempt);

 private:
  const LaunchConfig* config_;
  std::filesystem::path run_dir_;  // empty: no files
  std::string hostname_;
  std::shared_ptr<int> prepared_attempt_;
};

// Where the workers' progress files go (DDPRUN_PROGRESS_EVENTS): progress/
// in the run directory; with no run directory (--log-dir /dev/null) a fresh
// directory under $TMPDIR, removed when this goes. Throws ddprun::Error
// naming the directory when it cannot be made. Main's, for the whole run.
class ProgressDir {
 public:
  explicit ProgressDir(const std::filesystem::path& run_dir);
  ~ProgressDir();
  ProgressDir(const ProgressDir&) = delete;
  ProgressDir& operator=(const ProgressDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  bool owned_ = false;  // made under $TMPDIR: removed at the end
};

// "logs in <dir>", or that there are none: for the agent's first info line.
std::string describeLogs(const std::filesystem::path& run_dir);

// One worker's output in one attempt (a stateless rule; RunLogs prepares the
// attempt's directory first). `run_dir` empty: no files, no error file; a
// redirected stream is dropped and a tee'd one goes to the console only.
WorkerOutput workerOutput(const LaunchConfig& config, const std::filesystem::path& run_dir,
                          const std::string& hostname, int local_rank, int rank, int attempt);

}  // namespace ddprun::launcher

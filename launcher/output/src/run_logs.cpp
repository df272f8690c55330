#include "ddprun/launcher/output/run_logs.hpp"

#include <stdlib.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "ddprun/proto/errors.hpp"
#include "ddprun/proto/visible_text.hpp"

namespace ddprun::launcher {
namespace {

namespace fs = std::filesystem;

// --log-line-prefix-template's placeholders, as torchrun expands them.
std::string expandPrefix(std::string text, const LaunchConfig& config, int local_rank, int rank,
                         const std::string& hostname) {
  const std::pair<std::string, std::string> values[] = {
      {"${role_name}", config.role},
      {"${local_rank}", std::to_string(local_rank)},
      {"${rank}", std::to_string(rank)},
      {"${hostname}", hostname}};
  for (const auto& [placeholder, value] : values) {
    for (auto at = text.find(placeholder); at != std::string::npos;
         at = text.find(placeholder, at + value.size())) {
      text.replace(at, placeholder.size(), value);
    }
  }
  return text;
}

// torchrun's "no log files" setting.
bool noLogFiles(const LaunchConfig& config) { return config.log_dir == "/dev/null"; }

// mkdtemp(3) on `pattern` (ending in XXXXXX): a new directory no one else has.
fs::path makeUniqueDir(const fs::path& pattern, const char* what) {
  std::string name = pattern.string();
  if (mkdtemp(name.data()) == nullptr) {
    throw Error(std::string("cannot create ") + what + " " + pattern.string() + ": " +
                std::strerror(errno));
  }
  return name;
}

}  // namespace

fs::path runLogDir(const LaunchConfig& config) {
  if (noLogFiles(config)) {
    return {};
  }
  fs::path base;
  if (config.log_dir) {
    // Absolute: a worker that changes directory (Hydra does) still finds
    // its TORCHELASTIC_ERROR_FILE.
    base = fs::absolute(*config.log_dir).lexically_normal();
    std::error_code error;
    fs::create_directories(base, error);
    if (error) {
      throw Error("cannot create the log directory " + base.string() + ": " + error.message());
    }
  } else {
    base = makeUniqueDir(fs::temp_directory_path() / "ddprun_XXXXXX", "a temporary log directory");
  }
  return makeUniqueDir(base / (config.rdzv_id + std::string(kRunDirSuffix)),
                       "the run's log directory");
}

ProgressDir::ProgressDir(const fs::path& run_dir) {
  if (run_dir.empty()) {
    path_ = makeUniqueDir(fs::temp_directory_path() / "ddprun-progress-XXXXXX",
                          "a directory for the workers' progress files");
    owned_ = true;
    return;
  }
  path_ = run_dir / "progress";
  std::error_code error;
  fs::create_directories(path_, error);
  if (error) {
    throw Error("cannot create " + path_.string() +
                " for the workers' progress files: " + error.message());
  }
}

ProgressDir::~ProgressDir() {
  if (owned_) {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
}

std::string describeLogs(const fs::path& run_dir) {
  return run_dir.empty() ? "no log files (--log-dir /dev/null)"
                         : "logs in " + proto::visible(run_dir.string());
}

RunLogs::RunLogs(const LaunchConfig& config, fs::path run_dir, std::string hostname)
    : config_(&config),
      run_dir_(std::move(run_dir)),
      hostname_(std::move(hostname)),
      prepared_attempt_(std::make_shared<int>(-1)) {}

// Once per attempt, before its first worker starts: a leftover attempt_N/
// (its number used before in this directory) goes, error files included.
WorkerOutput RunLogs::operator()(int local_rank, int rank, int attempt) {
  if (!run_dir_.empty() && *prepared_attempt_ != attempt) {
    const fs::path attempt_dir = run_dir_ / ("attempt_" + std::to_string(attempt));
    std::error_code error;
    fs::remove_all(attempt_dir, error);
    if (error) {
      throw Error("cannot empty " + attempt_dir.string() + ": " + error.message());
    }
    fs::create_directories(attempt_dir);
    *prepared_attempt_ = attempt;
  }
  return workerOutput(*config_, run_dir_, hostname_, local_rank, rank, attempt);
}

// -r sends a stream to its file only, -t to its file and the console with
// a prefix, neither to the console only; --local-ranks-filter and
// --ranks-filter limit the console, never the files. Layout: <run>/attempt_N/<local_rank>/. Without
// a run directory (--log-dir /dev/null) there are no files: -r drops the
// stream and -t leaves the console only.
WorkerOutput workerOutput(const LaunchConfig& config, const fs::path& run_dir,
                          const std::string& hostname, int local_rank, int rank, int attempt) {
  const bool files = !run_dir.empty();
  const fs::path dir =
      files ? run_dir / ("attempt_" + std::to_string(attempt)) / std::to_string(local_rank)
            : fs::path();
  if (files) {
    fs::create_directories(dir);
  }
  const auto redirect = static_cast<int>(config.redirects.forLocalRank(local_rank));
  const auto tee = static_cast<int>(config.tee.forLocalRank(local_rank));
  const bool shown =
      (!config.local_ranks_filter || config.local_ranks_filter->contains(local_rank)) &&
      (!config.ranks_filter || config.ranks_filter->contains(rank));
  const std::string prefix =
      expandPrefix(config.log_line_prefix_template.value_or("[${role_name}${local_rank}]:"), config,
                   local_rank, rank, hostname);
  WorkerOutput output;
  output.error_file = files ? (dir / "error.json").string() : std::string();
  auto route = [&](int stream, const char* file, std::string& path, bool& console,
                   std::string& line_prefix, bool& may_be_terminal) {
    const bool teed = (tee & stream) != 0;
    const bool redirected = (redirect & stream) != 0;
    path = files && (teed || redirected) ? (dir / file).string() : std::string();
    console = shown && (teed || !redirected);
    line_prefix = teed ? prefix : std::string();
    may_be_terminal = shown && !teed && !redirected;
  };
  route(static_cast<int>(Std::kOut), "stdout.log", output.stdout_file, output.stdout_to_console,
        output.stdout_prefix, output.stdout_may_be_terminal);
  route(static_cast<int>(Std::kErr), "stderr.log", output.stderr_file, output.stderr_to_console,
        output.stderr_prefix, output.stderr_may_be_terminal);
  // Every stream is filtered, -r/-t or not; one file per attempt, none
  // without a run directory.
  const auto filtered = [&](const char* file) {
    return files ? (dir.parent_path() / file).string() : std::string();
  };
  output.stdout_filter = {config.duplicate_stdout_filters, filtered("filtered_stdout.log"), prefix};
  output.stderr_filter = {config.duplicate_stderr_filters, filtered("filtered_stderr.log"), prefix};
  return output;
}

}  // namespace ddprun::launcher

#include "worker_output.hpp"

#include <stdlib.h>

#include "ddprun/proto/errors.hpp"

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

}  // namespace

// <log_dir>/<run_id>, or a fresh temporary directory's, as torchrun does.
std::filesystem::path runLogDir(const LaunchConfig& config) {
  fs::path base;
  if (config.log_dir) {
    base = *config.log_dir;
  } else {
    std::string pattern = (fs::temp_directory_path() / "ddprun_XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) {
      throw Error("cannot create a temporary log directory in " +
                  fs::temp_directory_path().string());
    }
    base = pattern;
  }
  fs::create_directories(base / config.rdzv_id);
  return base / config.rdzv_id;
}

// -r sends a stream to its file only, -t to its file and the console with
// a prefix, neither to the console only; --local-ranks-filter limits the
// console, never the files. Layout: <run>/attempt_N/<local_rank>/.
WorkerOutput workerOutput(const LaunchConfig& config, const fs::path& run_dir,
                          const std::string& hostname, int local_rank, int rank, int attempt) {
  const fs::path dir =
      run_dir / ("attempt_" + std::to_string(attempt)) / std::to_string(local_rank);
  fs::create_directories(dir);
  const auto redirect = static_cast<int>(config.redirects.forLocalRank(local_rank));
  const auto tee = static_cast<int>(config.tee.forLocalRank(local_rank));
  const bool shown = !config.local_ranks_filter || config.local_ranks_filter->contains(local_rank);
  const std::string prefix =
      expandPrefix(config.log_line_prefix_template.value_or("[${role_name}${local_rank}]:"), config,
                   local_rank, rank, hostname);
  WorkerOutput output;
  output.error_file = (dir / "error.json").string();
  auto route = [&](int stream, const char* file, std::string& path, bool& console,
                   std::string& line_prefix, bool& may_be_terminal) {
    const bool teed = (tee & stream) != 0;
    const bool redirected = (redirect & stream) != 0;
    path = teed || redirected ? (dir / file).string() : std::string();
    console = shown && (teed || !redirected);
    line_prefix = teed ? prefix : std::string();
    may_be_terminal = shown && !teed && !redirected;
  };
  route(static_cast<int>(Std::kOut), "stdout.log", output.stdout_file, output.stdout_to_console,
        output.stdout_prefix, output.stdout_may_be_terminal);
  route(static_cast<int>(Std::kErr), "stderr.log", output.stderr_file, output.stderr_to_console,
        output.stderr_prefix, output.stderr_may_be_terminal);
  // Every stream is filtered, -r/-t or not; one file per attempt.
  output.stdout_filter = {config.duplicate_stdout_filters,
                          (dir.parent_path() / "filtered_stdout.log").string(), prefix};
  output.stderr_filter = {config.duplicate_stderr_filters,
                          (dir.parent_path() / "filtered_stderr.log").string(), prefix};
  return output;
}

}  // namespace ddprun::launcher

// Runs torch's Flight Recorder analyser over a failed attempt's dumps (see
// flight_recorder.hpp).
#include "ddprun/launcher/agent/flight_recorder.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <optional>

#include "ddprun/launcher/config/python_interpreter.hpp"
#include "ddprun/launcher/core/regular_file.hpp"
#include "ddprun/launcher/process/subprocess.hpp"
#include "ddprun/proto/env_contract.hpp"

namespace ddprun::launcher {
namespace {

namespace fs = std::filesystem;

// The most of the analyser's output kept in the verdict (the file has all).
constexpr std::size_t kMaxVerdictBytes = std::size_t{64} << 10;

bool isDump(const fs::path& file) {
  return file.filename().string().rfind(proto::env::kNcclTraceDumpPrefix, 0) == 0;
}

// The attempt directory of the root cause (the parent of its rank
// directory), where its error file says the run keeps files.
std::optional<fs::path> attemptDirectory(const RunResult& result) {
  if (result.failures.empty() || result.failures.front().error_file.empty()) {
    return std::nullopt;
  }
  return fs::path(result.failures.front().error_file).parent_path().parent_path();
}

// The analyser wants every rank's dump in one directory; a hard link costs
// nothing, a copy is the fallback where the file system refuses links.
fs::path gatherDumps(const fs::path& attempt, const std::vector<std::string>& dumps) {
  fs::path gathered = attempt / "flight_recorder";
  std::error_code error;
  fs::create_directories(gathered, error);
  for (const std::string& dump : dumps) {
    const fs::path target = gathered / fs::path(dump).filename();
    fs::remove(target, error);
    fs::create_hard_link(dump, target, error);
    if (error) {
      fs::copy_file(dump, target, fs::copy_options::overwrite_existing, error);
    }
  }
  return gathered;
}

// Runs the analyser with its output in `output`; its exit status, none if
// it could not start or was killed at the deadline.
std::optional<ExitStatus> runAnalyser(const std::string& python, const fs::path& gathered,
                                      const fs::path& output, std::chrono::milliseconds deadline) {
  const int out = ::open(output.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (out < 0) {
    return std::nullopt;
  }
  SpawnOptions options;
  options.argv = {python,
                  "-m",
                  kFlightRecorderAnalyser,
                  "--prefix",
                  std::string(proto::env::kNcclTraceDumpPrefix),
                  gathered.string()};
  options.env = inheritedEnvironment();
  options.stdout_fd = out;
  options.stderr_fd = out;
  const auto status = runWithin(options, deadline);
  ::close(out);
  return status;
}

// For --no-python workers (a C++ trainer on NCCL), the Python that finds
// torch as a Python worker's would be chosen; "" when none does.
std::string analyserPython() {
  try {
    const TorchProbeOptions probe = agentProbeOptions();
    return choosePython(processEnvironment(),
                        [&probe](const std::string& python) { return findsTorch(python, probe); })
        .path;
  } catch (const ConfigError&) {
    return "";  // the report says there is no verdict, and why
  }
}

std::string whyNoVerdict(const std::optional<ExitStatus>& status, const std::string& output,
                         std::chrono::milliseconds deadline) {
  if (!status) {
    return "torch's analyser could not run, or was not done within " +
           std::to_string(deadline.count() / 1000) + " s";
  }
  if (output.find("No module named") != std::string::npos) {
    return "torch's analyser (" + std::string(kFlightRecorderAnalyser) +
           ", torch 2.5 and later) is not installed for this Python";
  }
  return "torch's analyser failed (" + status->describe() + ")";
}

}  // namespace

std::vector<std::string> flightRecorderDumps(const std::string& error_file) {
  std::vector<std::string> dumps;
  if (error_file.empty()) {
    return dumps;
  }
  const fs::path attempt = fs::path(error_file).parent_path().parent_path();
  std::error_code error;
  for (const auto& rank : fs::directory_iterator(attempt, error)) {
    std::error_code inner;
    if (!rank.is_directory(inner) || rank.path().filename() == "flight_recorder") {
      continue;
    }
    for (const auto& entry : fs::directory_iterator(rank.path(), inner)) {
      if (isDump(entry.path()) && entry.is_regular_file(inner)) {
        dumps.push_back(entry.path().string());
      }
    }
  }
  std::sort(dumps.begin(), dumps.end());
  return dumps;
}

FlightRecorderVerdict analyseFlightRecorderDumps(const RunResult& result, const std::string& python,
                                                 std::chrono::milliseconds deadline) {
  FlightRecorderVerdict verdict;
  const auto attempt = attemptDirectory(result);
  if (!attempt) {
    return verdict;
  }
  verdict.dumps = flightRecorderDumps(result.failures.front().error_file);
  if (verdict.dumps.empty()) {
    return verdict;
  }
  const std::string interpreter = python.empty() ? analyserPython() : python;
  if (interpreter.empty()) {
    verdict.text = "no Python that finds torch, so torch's analyser was not run";
    return verdict;
  }
  const fs::path gathered = gatherDumps(*attempt, verdict.dumps);
  verdict.output = *attempt / "flight_recorder.txt";
  const auto status = runAnalyser(interpreter, gathered, verdict.output, deadline);
  const RegularFileRead read = readRegularFile(verdict.output, kMaxVerdictBytes, Links::kRefuse);
  verdict.analysed = status && status->success();
  verdict.text = verdict.analysed ? read.text : whyNoVerdict(status, read.text, deadline);
  return verdict;
}

}  // namespace ddprun::launcher

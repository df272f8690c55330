// torchrun's failure table, with what torch's @record wrote to each
// worker's TORCHELASTIC_ERROR_FILE: {"message": {"message": ...,
// "extraInfo": {"py_callstack": ..., "timestamp": ...}}}.
#include <signal.h>

#include <algorithm>
#include <ctime>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "ddprun/launcher/agent/agent.hpp"
#include "ddprun/launcher/core/regular_file.hpp"
#include "ddprun/proto/env_contract.hpp"
#include "ddprun/proto/json_parse.hpp"
#include "ddprun/proto/json_text.hpp"

namespace ddprun::launcher {
namespace {

std::string formatTime(std::chrono::system_clock::time_point time) {
  const std::time_t seconds = std::chrono::system_clock::to_time_t(time);
  std::tm local{};
  localtime_r(&seconds, &local);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%d_%H:%M:%S", &local);
  return text;
}

// The most read of an error file: torch's are a traceback, a few KiB.
constexpr std::size_t kMaxErrorFileBytes = std::size_t{4} << 20;

// What a worker left in its error file: nullopt when it left none (or there
// are no error files: --log-dir /dev/null), a discarded value when what is
// there is no JSON to read. The worker controls the file, so it is read as
// the timeline reads the worker's events: a regular file, not through a
// link, bounded, its nesting too.
std::optional<nlohmann::json> errorFileJson(const std::string& error_file) {
  if (error_file.empty()) {
    return std::nullopt;
  }
  const RegularFileRead read = readRegularFile(error_file, kMaxErrorFileBytes, Links::kRefuse);
  if (!read.found) {
    return std::nullopt;
  }
  if (!read.why.empty() || read.over_cap) {
    return nlohmann::json(nlohmann::json::value_t::discarded);
  }
  return proto::parseJson(read.text);
}

// The traceback (or message) a worker's @record left, if it left one. The
// file can only be this attempt's: its directory is the run's own and was
// emptied before the attempt started (RunLogs in output/run_logs.hpp).
std::optional<std::string> recordedError(const std::string& error_file) {
  const auto json = errorFileJson(error_file);
  if (!json) {
    return std::nullopt;
  }
  if (json->is_discarded() || !json->contains("message")) {
    return "(unreadable error file)";
  }
  const nlohmann::json& message = json->at("message");
  if (!message.is_object()) {
    return proto::jsonText(message);
  }
  const auto extra = message.find("extraInfo");
  if (extra != message.end() && extra->is_object() && extra->contains("py_callstack") &&
      extra->at("py_callstack").is_string()) {
    return extra->at("py_callstack").get<std::string>();
  }
  const auto text = message.find("message");
  return text != message.end() && text->is_string() ? text->get<std::string>()
                                                    : proto::jsonText(message);
}

// A captured stack, indented under the entry; long ones are cut (the whole
// text is in the stack file).
void describeStack(std::ostream& out, const WorkerVerdict& verdict) {
  constexpr int kMaxLines = 120;
  out << "  stack     :";
  if (!verdict.stack_file.empty()) {
    out << " (also in " << verdict.stack_file << ")";
  }
  out << "\n";
  std::istringstream lines(verdict.stack);
  int shown = 0;
  int cut = 0;
  for (std::string line; std::getline(lines, line);) {
    if (shown < kMaxLines) {
      out << "    " << line << "\n";
      ++shown;
    } else {
      ++cut;
    }
  }
  if (cut > 0) {
    out << "    ... " << cut << " more line(s)\n";
  }
}

// What NCCL's Flight Recorder dumped beside the worker's error file (the
// agent arms it there: WorkerEnvironment), which says which collective each
// rank was in when one timed out.
void describeNcclDumps(std::ostream& out, const std::string& error_file) {
  if (error_file.empty()) {
    return;
  }
  std::error_code error;
  std::vector<std::string> dumps;
  for (const auto& entry : std::filesystem::directory_iterator(
           std::filesystem::path(error_file).parent_path(), error)) {
    if (entry.path().filename().string().rfind(proto::env::kNcclTraceDumpPrefix, 0) == 0) {
      dumps.push_back(entry.path().string());
    }
  }
  std::sort(dumps.begin(), dumps.end());
  for (std::size_t i = 0; i < dumps.size(); ++i) {
    out << (i == 0 ? "  nccl      : Flight Recorder dump " : "              ") << dumps[i] << "\n";
  }
}

void describe(std::ostream& out, const WorkerFailure& failure, const std::string& hostname) {
  const int code =
      failure.status.kind == ExitStatus::Kind::Exited ? failure.status.code : -failure.status.code;
  const auto recorded = recordedError(failure.error_file);
  const std::string reason = failure.verdict.empty()
                                 ? failure.status.describe()
                                 : failure.verdict.reason + "; " + failure.status.describe();
  out << "  time      : " << formatTime(failure.time) << "\n"
      << "  host      : " << hostname << "\n"
      << "  rank      : " << failure.rank << " (local_rank: " << failure.local_rank << ")\n"
      << "  exitcode  : " << code << " (pid: " << failure.pid << ")\n"
      << "  attempt   : " << failure.attempt << "\n"
      << "  reason    : " << reason << "\n"
      << "  error_file: " << (recorded ? failure.error_file : "<N/A>") << "\n"
      << "  traceback : "
      << (recorded ? *recorded
                   : "To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html")
      << "\n";
  if (!failure.verdict.stack.empty()) {
    describeStack(out, failure.verdict);
  }
  if (!failure.verdict.empty() && failure.status.kind == ExitStatus::Kind::Signaled &&
      failure.status.code == SIGABRT) {
    out << "  python    : every thread's Python stack, printed by faulthandler on this rank's "
           "stderr as it was stopped\n";
  }
  describeNcclDumps(out, failure.error_file);
  if (!failure.verdict.peer_stacks.empty()) {
    out << "  peers     : where the other ranks were (this node's, then the other nodes')\n";
    std::istringstream lines(failure.verdict.peer_stacks);
    for (std::string line; std::getline(lines, line);) {
      out << "    " << line << "\n";
    }
  }
}

// The Flight Recorder's dumps of the root cause's attempt on this node, and
// the first lines of torch's verdict on them (or why there is none).
void describeFlightRecorder(std::ostream& out, const FlightRecorderVerdict& verdict) {
  constexpr int kMaxLines = 40;
  out << "Flight Recorder (NCCL): " << verdict.dumps.size() << " dump(s) on this node\n";
  if (!verdict.analysed) {
    out << "  no verdict: " << verdict.text << "\n";
    return;
  }
  out << "  verdict of torch's analyser (all of it in " << verdict.output.string() << "):\n";
  std::istringstream lines(verdict.text);
  int shown = 0;
  for (std::string line; std::getline(lines, line) && shown < kMaxLines; ++shown) {
    out << "    " << line << "\n";
  }
}

// When the worker recorded its failure, if its error file says so finely.
std::optional<std::chrono::steady_clock::time_point> recordedFailureTime(
    const std::string& error_file) {
  const auto json = errorFileJson(error_file);
  if (!json) {
    return std::nullopt;
  }
  try {
    const std::string text = json->at("message").at("extraInfo").at("monotonic_ns");
    return std::chrono::steady_clock::time_point(std::chrono::nanoseconds(std::stoll(text)));
  } catch (const std::exception&) {
    return std::nullopt;  // torch's own files carry whole seconds only
  }
}

}  // namespace

void orderRootCauseFirst(std::vector<WorkerFailure>& failures) {
  for (WorkerFailure& failure : failures) {
    if (auto recorded = recordedFailureTime(failure.error_file)) {
      failure.monotonic = std::min(failure.monotonic, *recorded);
    }
  }
  std::stable_sort(
      failures.begin(), failures.end(),
      [](const WorkerFailure& a, const WorkerFailure& b) { return a.monotonic < b.monotonic; });
}

std::string formatFailureReport(const RunResult& result, const std::string& hostname,
                                const std::string& program,
                                const FlightRecorderVerdict& flight_recorder) {
  std::ostringstream out;
  const std::string rule(60, '=');
  const std::string thin(60, '-');
  out << rule << "\n" << program << " FAILED\n" << thin << "\nFailures:\n";
  if (result.failures.size() <= 1) {
    out << "  <NO_OTHER_FAILURES>\n";
  }
  for (std::size_t i = 1; i < result.failures.size(); ++i) {
    out << "[" << i << "]:\n";
    describe(out, result.failures[i], hostname);
  }
  out << thin << "\nRoot Cause (first observed failure):\n[0]:\n";
  if (!result.failures.empty()) {
    describe(out, result.failures.front(), hostname);
  }
  if (!flight_recorder.dumps.empty()) {
    out << thin << "\n";
    describeFlightRecorder(out, flight_recorder);
  }
  out << rule << "\n";
  return out.str();
}

}  // namespace ddprun::launcher

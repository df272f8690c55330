// The verdict of torch's own Flight Recorder analyser on the dumps NCCL left
// in a failed attempt's directory (the agent arms the recorder there:
// WorkerEnvironment). torch 2.5 and later ship the analyser as
// `python -m torch.distributed.flight_recorder.fr_trace`; it reads every
// rank's dump from one directory and names the collective where the ranks
// diverged and the ranks missing from it.
//
// Stateless free functions, run by main's thread once the agent's run has
// ended: the analyser imports torch, which takes a second or two, and only a
// failed NCCL job leaves dumps.
#pragma once

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include "ddprun/launcher/core/run_result.hpp"

namespace ddprun::launcher {

// The module that analyses the dumps, as `python -m` takes it.
inline constexpr const char* kFlightRecorderAnalyser = "torch.distributed.flight_recorder.fr_trace";

struct FlightRecorderVerdict {
  std::vector<std::string> dumps;  // this node's dumps of the attempt, sorted
  std::filesystem::path output;    // where the analyser's whole output was saved
  std::string text;                // what it printed (bounded), or why there is no verdict
  bool analysed = false;           // the analyser ran and finished with status 0
};

// The dumps (nccl_trace_rank_*) in the per-rank directories of the attempt
// whose directory holds `error_file`; none when the run keeps no files.
std::vector<std::string> flightRecorderDumps(const std::string& error_file);

// Gathers the dumps of the root cause's attempt into <attempt>/flight_recorder/
// (hard links, else copies) and runs the analyser there with `python`, its
// output in <attempt>/flight_recorder.txt, killed after `deadline`. Empty
// `dumps` when there are none: then nothing is run. An empty `python` (the
// workers run no Python) means the Python a Python worker would be given.
// Without an interpreter or the analyser, `text` says so in one line.
FlightRecorderVerdict analyseFlightRecorderDumps(const RunResult& result, const std::string& python,
                                                 std::chrono::milliseconds deadline);

}  // namespace ddprun::launcher

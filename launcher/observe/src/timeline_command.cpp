#include "ddprun/launcher/observe/timeline_command.hpp"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "ddprun/launcher/core/regular_file.hpp"
#include "ddprun/launcher/observe/timeline_merge.hpp"
#include "ddprun/proto/cli_args.hpp"

namespace ddprun::launcher {
namespace {

namespace fs = std::filesystem;
using timeline::TraceError;

// The most read of one input. An agent's own events are a few lines a
// round, and each worker's events at most a MiB an attempt; the merge holds
// every event parsed, several times this in memory.
constexpr std::size_t kMaxInputBytes = std::size_t{256} << 20;

constexpr const char* kUsage =
    "usage: ddprun timeline [-h] [-o FILE] [--mixed-runs] DIR [DIR ...]\n";

constexpr const char* kHelp =
    "\nMerges the timeline.json files of a job's agents (one per node) into one trace on the\n"
    "rendezvous' clock, for Perfetto (ui.perfetto.dev) or chrome://tracing.\n\n"
    "positional arguments:\n"
    "  DIR                   a timeline.json, a run directory holding one, or a log\n"
    "                        directory (--log-dir) whose run directories hold them\n\n"
    "options:\n"
    "  -h, --help            show this help message and exit\n"
    "  -o FILE, --output FILE\n"
    "                        write the merged trace to FILE (default: stdout)\n"
    "  --mixed-runs          merge files of different runs (their run ids differ) anyway,\n"
    "                        on the hosts' wall clocks; without it they are refused\n";

// Bad input: what, and why.
class InputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The timeline files `input` names, each one node's.
std::vector<fs::path> timelineFiles(const fs::path& input) {
  std::error_code error;
  const fs::file_status status = fs::status(input, error);
  if (!fs::exists(status)) {
    throw InputError(input.string() + ": no such file or directory");
  }
  if (!fs::is_directory(status)) {
    return {input};
  }
  if (fs::exists(input / timeline::kFileName)) {
    return {input / timeline::kFileName};
  }
  std::vector<fs::path> files;
  for (const fs::directory_entry& entry : fs::directory_iterator(input, error)) {
    if (entry.is_directory() && fs::exists(entry.path() / timeline::kFileName)) {
      files.push_back(entry.path() / timeline::kFileName);
    }
  }
  if (files.empty()) {
    throw InputError(input.string() + ": no " + std::string(timeline::kFileName) +
                     " in it, nor in any directory in it");
  }
  std::sort(files.begin(), files.end());
  return files;
}

// Only a regular file is read (a FIFO is never waited on, a device such as
// /dev/zero never read), and only up to kMaxInputBytes; a link a person
// made to a file is followed.
timeline::NodeTrace readNode(const fs::path& file) {
  const RegularFileRead read = readRegularFile(file, kMaxInputBytes, Links::kFollow);
  if (!read.found) {
    throw InputError(file.string() + ": no such file or directory");
  }
  if (!read.why.empty()) {
    throw InputError(file.string() + ": not read: " + read.why);
  }
  if (read.over_cap) {
    throw InputError(file.string() + ": not read: larger than " +
                     std::to_string(kMaxInputBytes >> 20) +
                     " MiB, the most ddprun timeline reads of one file");
  }
  try {
    return {file.string(), timeline::parseTrace(read.text)};
  } catch (const TraceError& error) {
    throw InputError(file.string() + ": " + error.what());
  }
}

void writeOutput(const std::string& output, const std::string& text) {
  if (output.empty()) {
    const bool written = std::fwrite(text.data(), 1, text.size(), stdout) == text.size();
    if (std::fflush(stdout) != 0 || !written) {
      throw InputError("the standard output cannot be written: " +
                       std::string(std::strerror(errno)));
    }
    return;
  }
  std::ofstream out(output, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) {
    throw InputError(output + ": cannot be written");
  }
}

}  // namespace

int runTimelineCommand(const std::vector<std::string>& args) {
  CLI::App app("ddprun timeline");
  app.set_help_flag();  // its own -h, with argparse's layout
  bool help = false;
  bool mixed_runs = false;
  std::string output;
  std::vector<std::string> inputs;
  app.add_flag("-h,--help", help);
  app.add_flag("--mixed-runs", mixed_runs);
  app.add_option("-o,--output", output);
  app.add_option("inputs", inputs);
  try {
    // As argparse: "-o=FILE" is FILE, and "--output=" is "", refused (it
    // would otherwise take the next argument, a DIR, for the output).
    const std::vector<std::string> read = proto::readAsArgparse(app, args);
    std::vector<std::string> reversed(read.rbegin(), read.rend());  // CLI11 reads them reversed
    app.parse(reversed);
  } catch (const CLI::ParseError& error) {
    std::fprintf(stderr, "ddprun timeline: %s\n%s", error.what(), kUsage);
    return 2;
  }
  if (help) {
    std::printf("%s%s", kUsage, kHelp);
    return 0;
  }
  if (inputs.empty()) {
    std::fprintf(stderr, "ddprun timeline: the following arguments are required: DIR\n%s", kUsage);
    return 2;
  }
  try {
    std::vector<timeline::NodeTrace> nodes;
    for (const std::string& input : inputs) {
      for (const fs::path& file : timelineFiles(input)) {
        nodes.push_back(readNode(file));
        timeline::addUnfoldedWorkerEvents(nodes.back());
      }
    }
    const timeline::MergedTrace merged = timeline::mergeTraces(
        nodes, mixed_runs ? timeline::MixedRuns::kMergeOnWallClocks : timeline::MixedRuns::kRefuse);
    writeOutput(output, timeline::formatTrace(merged.events));
    for (const std::string& note : merged.notes) {
      std::fprintf(stderr, "ddprun timeline: %s\n", note.c_str());
    }
  } catch (const std::exception& error) {
    std::fprintf(stderr, "ddprun timeline: %s\n", error.what());
    return 1;
  }
  return 0;
}

}  // namespace ddprun::launcher

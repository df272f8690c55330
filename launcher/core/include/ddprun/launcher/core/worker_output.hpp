// Where one worker's output goes (WorkerOutput) and the line filters of
// --duplicate-*-filters: plain types the agent is configured with and the
// output relay follows. No threads; values only.
#pragma once

#include <string>
#include <vector>

namespace ddprun::launcher {

// --duplicate-stdout-filters / --duplicate-stderr-filters for one stream:
// each whole line containing any of `substrings` is copied, after `prefix`,
// into `file`, which the node's workers share for the attempt.
struct LineFilter {
  std::vector<std::string> substrings;  // empty: no filter
  std::string file;                     // empty: none (no log files)
  std::string prefix;
};

// Where one worker's output goes. Output always passes through the agent
// (a pipe, or a pseudo-terminal), so the console only ever receives whole
// lines, and a live '\r' line only where the console is a terminal.
struct WorkerOutput {
  std::string stdout_file;  // empty: no file
  std::string stderr_file;
  bool stdout_to_console = true;
  bool stderr_to_console = true;
  std::string stdout_prefix;  // e.g. "[default0]:" for tee'd lines
  std::string stderr_prefix;
  // A stream neither redirected nor tee'd that is shown: when ddprun's own
  // stream is a terminal, the worker's gets a pseudo-terminal of its own.
  bool stdout_may_be_terminal = true;
  bool stderr_may_be_terminal = true;
  LineFilter stdout_filter;
  LineFilter stderr_filter;
  std::string error_file;  // TORCHELASTIC_ERROR_FILE: where torch's @record writes
};

}  // namespace ddprun::launcher

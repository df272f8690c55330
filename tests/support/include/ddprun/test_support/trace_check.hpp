// A check of a trace file against Chrome's trace event format (JSON Array
// Format), written for the tests from the format's rules and independent of
// ddprun's own reader: every event an object with a string "name" and a
// one-letter "ph", numbers "ts", "pid" and "tid"; "X" with "dur" >= 0; "i"
// with a scope "s" (g, p or t); "M" one of the metadata events the viewers
// know, with its args (args.name, args.sort_index); each "E" closing a "B"
// of its track, and the B/E/thread instants of a track in time order (what
// chrome://tracing needs). The text must parse as strict JSON as it is when
// it ends with "]", and after the repair viewers make (a trailing "," dropped,
// the "]" added) when it does not. Stateless.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace ddprun::test_support {

struct TraceCheck {
  std::vector<std::string> problems;  // empty: a valid trace
  bool closed = false;                // ended with its "]"
  int events = 0;
  int open_slices = 0;  // "B" events never closed by an "E"
};

TraceCheck checkTrace(std::string_view text);

// A trace's events, its "]" added if it was cut short (as viewers do); none
// while the text is not (yet) whole JSON.
std::vector<nlohmann::json> traceEvents(std::string_view text);

// The events of `all` named `name`, of process `pid` (-1: any).
std::vector<nlohmann::json> eventsNamed(const std::vector<nlohmann::json>& all,
                                        const std::string& name, int pid = -1);

}  // namespace ddprun::test_support

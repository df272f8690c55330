// `ddprun status`'s text for humans: a rendezvous' answers (decoded by
// proto/rendezvous_status.hpp) as aligned tables. Pure functions, no I/O.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ddprun/proto/rendezvous_status.hpp"

namespace ddprun::launcher {

// One run, whole: a summary, the members, the spares, the losses.
std::string formatJobStatus(const proto::rendezvous::JobStatus& status, std::string_view endpoint);
// The runs a rendezvous holds, one line each; a sentence when there is none.
std::string formatJobList(const std::vector<proto::rendezvous::JobSummary>& jobs,
                          std::string_view endpoint);

// "850 ms", "4.2 s", "3 min 5 s", "2 h 7 min".
std::string describeDuration(std::int64_t milliseconds);

// `text` with each control character (below 0x20, and 0x7f) as "\xNN": what
// agents and workers named (agent ids, run ids, failure reasons) must not
// send escape sequences to the terminal of whoever runs `ddprun status`.
std::string visible(std::string_view text);

// Rows of cells as left-aligned columns, two blanks apart, without trailing
// blanks, each cell visible(). Written by hand: none of the project's
// libraries lays out tables.
std::string alignColumns(const std::vector<std::vector<std::string>>& rows);

}  // namespace ddprun::launcher

// `ddprun status`'s text for humans: a rendezvous' answers (decoded by
// proto/rendezvous_status.hpp) as aligned tables. Pure functions, no I/O.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ddprun/proto/rendezvous_status.hpp"

namespace ddprun::launcher {

// One run, whole: a summary, the members, the spares, the losses.
std::string formatJobStatus(const proto::rendezvous::JobStatus& status, std::string_view endpoint);
// The runs a rendezvous holds, one line each; a sentence when there is none.
// `total`: the runs it holds (JobList::total); when more than it listed, a
// last line says so.
std::string formatJobList(const std::vector<proto::rendezvous::JobSummary>& jobs,
                          std::string_view endpoint,
                          std::optional<std::int64_t> total = std::nullopt);

// "850 ms", "4.2 s", "3 min 5 s", "2 h 7 min".
std::string describeDuration(std::int64_t milliseconds);

// Rows of cells as left-aligned columns, two blanks apart, without trailing
// blanks, each cell shown by proto::visible() (agents and workers name
// themselves: what they sent must not drive the terminal of whoever runs
// `ddprun status`). Written by hand: none of the project's
// libraries lays out tables.
std::string alignColumns(const std::vector<std::vector<std::string>>& rows);

}  // namespace ddprun::launcher

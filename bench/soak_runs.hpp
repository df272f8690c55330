// ddprund_soak's run: one real ddprund (--run-retention short, metrics on)
// and `jobs` jobs of simulated agents against it, one after another
// (soak_jobs.hpp), scraped and asked about every `probe_every` jobs; then
// idle past the retention, until the daemon holds what a fresh one does.
// The daemon's resident memory is read after a warm-up (the first jobs,
// once their retention is over) and at the end, in the same state (nothing
// held), so the difference is what the jobs left behind. Runs on the
// calling thread.
#pragma once

#include <cstddef>
#include <filesystem>
#include <ostream>

namespace ddprun::bench {

struct SoakOptions {
  std::size_t jobs = 10'000;
  std::size_t warmup_jobs = 1'000;  // at most a tenth of `jobs`
  std::size_t probe_every = 100;
  double run_retention_s = 2;
  double job_timeout_s = 60;
  std::filesystem::path ddprund;
};

// Prints progress, then `jobs=N rss_start_mib=A rss_end_mib=B
// rss_growth_kib_per_1k_jobs=C keys_end=K runs_end=R` and the targets.
// Returns whether both targets were met; throws std::runtime_error (one
// line) when the run failed.
bool runSoak(const SoakOptions& options, std::ostream& out);

}  // namespace ddprun::bench

#include "progress_watch.hpp"

#include <unistd.h>

#include <algorithm>

#include "ddprun/launcher/supervision/procfs.hpp"

namespace ddprun::launcher {
namespace {

using std::chrono::milliseconds;

// How much longer than its timeout a stalled worker that sleeps is given,
// so that the busy rank it waits for is judged first, on its own node.
constexpr milliseconds kIdleGrace(1000);

}  // namespace

ProgressWatch::ProgressWatch(net::asio::io_context& io, ProgressTimeout timeout,
                             OnStalled on_stalled)
    : timeout_(timeout),
      on_stalled_(std::move(on_stalled)),
      timer_(
          io, [this] { return period(); },
          [this] {
            tick();
            return !stopped_ && !watched_.empty();
          }) {}

void ProgressWatch::watch(std::size_t index, pid_t pid, std::filesystem::path file) {
  if (stopped_) {
    return;
  }
  watched_.erase(index);
  watched_.emplace(index, Watched{pid, ProgressFile(std::move(file)), 0, 0, Clock::now(), -1,
                                  std::nullopt, false});
  arm();
}

void ProgressWatch::forget(std::size_t index) {
  const auto found = watched_.find(index);
  if (found == watched_.end()) {
    return;
  }
  read(found->second, Clock::now());  // its last reports count for the attempt's best step
  watched_.erase(found);
}

void ProgressWatch::clear() {
  watched_.clear();
  best_step_.reset();
  best_snapshot_.reset();
  judged_ = false;
  timer_.cancel();
}

void ProgressWatch::stop() {
  stopped_ = true;
  clear();
}

std::optional<std::int64_t> ProgressWatch::bestStep() {
  readAll(Clock::now());
  return best_step_;
}

std::optional<std::int64_t> ProgressWatch::bestSnapshot() {
  readAll(Clock::now());
  return best_snapshot_;
}

milliseconds ProgressWatch::period() const {
  if (!timeout_.enabled()) {
    return milliseconds(1000);  // only the best step is kept
  }
  // after(2): the shortest timeout any worker can be held to.
  return std::clamp(timeout_.after(2) / 8, milliseconds(50), milliseconds(1000));
}

void ProgressWatch::arm() {
  if (!stopped_ && !watched_.empty()) {
    timer_.start();
  }
}

// The intervals `auto` learns from are the workers' own timestamps (their
// CLOCK_MONOTONIC is the agent's steady clock), so they are exact however
// the reads fall; a worker without them is measured by when its lines were
// read. Silence is always measured by the reads: a clock that lies cannot
// keep a worker alive.
void ProgressWatch::readAll(Clock::time_point now) {
  for (auto& [index, worker] : watched_) {
    read(worker, now);
  }
}

void ProgressWatch::read(Watched& worker, Clock::time_point now) {
  const std::int64_t now_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(now.time_since_epoch()).count();
  const ProgressLines::Seen seen = worker.file.readNew();
  if (seen.snapshot_step) {
    best_snapshot_ = std::max(best_snapshot_.value_or(*seen.snapshot_step), *seen.snapshot_step);
  }
  if (seen.lines == 0) {
    return;
  }
  const bool timed = seen.first_ts_ns >= 0 && seen.last_ts_ns >= 0 && seen.last_ts_ns <= now_ns;
  std::chrono::nanoseconds longest(timed ? seen.longest_gap_ns : 0);
  if (worker.reports > 0) {
    const bool follows = timed && worker.last_ts_ns >= 0 && seen.first_ts_ns >= worker.last_ts_ns;
    longest = std::max<std::chrono::nanoseconds>(
        longest, follows ? std::chrono::nanoseconds(seen.first_ts_ns - worker.last_ts_ns)
                         : now - worker.last_report);
  }
  if (worker.reports > 0 || seen.lines > 1) {
    timeout_.intervalSeen(std::chrono::duration_cast<milliseconds>(longest));
  }
  worker.reports += seen.lines;
  worker.step = *seen.step;
  worker.last_report = now;
  worker.last_ts_ns = timed ? seen.last_ts_ns : -1;
  best_step_ = std::max(best_step_.value_or(worker.step), worker.step);
}

// Busy: a fifth of a CPU or more. A rank waiting in a Gloo collective uses
// next to none; a spinning one gets less than a whole CPU on a loaded host.
void ProgressWatch::sampleCpu() {
  const auto busy_ticks = static_cast<std::uint64_t>(
      std::max<long>(2, ::sysconf(_SC_CLK_TCK) * period().count() / 5000));
  for (auto& [index, worker] : watched_) {
    const auto stat = readProcStat(worker.pid);
    if (!stat) {
      continue;
    }
    worker.busy = worker.cpu_ticks && stat->cpu_ticks - *worker.cpu_ticks >= busy_ticks;
    worker.cpu_ticks = stat->cpu_ticks;
  }
}

const ProgressWatch::Watched* ProgressWatch::culprit(Clock::time_point now,
                                                     std::size_t& index) const {
  const milliseconds idle_grace = std::max(kIdleGrace, 2 * period());
  const Watched* behind = nullptr;
  for (const auto& [worker_index, worker] : watched_) {
    const auto limit =
        timeout_.after(worker.reports) + (worker.busy ? milliseconds(0) : idle_grace);
    if (worker.reports == 0 || now - worker.last_report < limit) {
      continue;
    }
    const bool before =
        behind == nullptr || (worker.busy && !behind->busy) ||
        (worker.busy == behind->busy &&
         (worker.step < behind->step ||
          (worker.step == behind->step && worker.last_report < behind->last_report)));
    if (before) {
      behind = &worker;
      index = worker_index;
    }
  }
  return behind;
}

void ProgressWatch::tick() {
  const Clock::time_point now = Clock::now();
  readAll(now);
  if (judged_ || !timeout_.enabled()) {
    return;
  }
  sampleCpu();
  std::size_t behind_index = 0;
  const Watched* behind = culprit(now, behind_index);
  if (behind == nullptr) {
    return;
  }
  Stalled stalled;
  stalled.index = behind_index;
  stalled.pid = behind->pid;
  stalled.step = behind->step;
  stalled.silent = std::chrono::duration_cast<milliseconds>(now - behind->last_report);
  stalled.timeout = timeout_.after(behind->reports);
  stalled.timeout_text = timeout_.describe(behind->reports);
  stalled.busy = behind->busy;
  judged_ = on_stalled_(stalled);
}

}  // namespace ddprun::launcher

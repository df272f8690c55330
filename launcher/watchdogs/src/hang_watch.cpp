#include "hang_watch.hpp"

#include <unistd.h>

#include <algorithm>

#include "ddprun/launcher/supervision/procfs.hpp"

namespace ddprun::launcher {
namespace {

using std::chrono::milliseconds;

milliseconds periodFor(milliseconds timeout) {
  return std::clamp(timeout / 4, milliseconds(100), milliseconds(5000));
}

std::uint64_t allowanceFor(milliseconds timeout) {
  const long ticks_per_second = ::sysconf(_SC_CLK_TCK);
  return static_cast<std::uint64_t>(timeout.count()) *
         static_cast<std::uint64_t>(ticks_per_second > 0 ? ticks_per_second : 100) / 100'000;
}

}  // namespace

HangWatch::HangWatch(net::asio::io_context& io, milliseconds timeout, OnHung on_hung)
    : timeout_(timeout),
      period_(periodFor(timeout)),
      allowance_ticks_(allowanceFor(timeout)),
      on_hung_(std::move(on_hung)),
      timer_(
          io, [this] { return period_; },
          [this] {
            tick();
            return !stopped_ && !watched_.empty();
          }) {}

void HangWatch::watch(std::size_t index, pid_t pid) {
  if (stopped_) {
    return;
  }
  Watched& worker = watched_[index];
  worker = Watched{};
  worker.pid = pid;
  const auto now = Clock::now();
  worker.last_output = now;
  worker.last_cpu = now;
  if (const auto ticks = treeCpuTicks(pid)) {
    worker.samples.push_back({now, *ticks});
  }
  arm();
}

void HangWatch::outputSeen(std::size_t index) {
  const auto found = watched_.find(index);
  if (found != watched_.end()) {
    found->second.last_output = Clock::now();
  }
}

void HangWatch::forget(std::size_t index) { watched_.erase(index); }

void HangWatch::clear() {
  watched_.clear();
  timer_.cancel();
}

void HangWatch::stop() {
  stopped_ = true;
  clear();
}

void HangWatch::arm() {
  if (!stopped_ && !watched_.empty()) {
    timer_.start();
  }
}

bool HangWatch::quiet(Watched& worker, Clock::time_point now) {
  const auto ticks = treeCpuTicks(worker.pid);
  if (!ticks) {
    return false;  // gone: its exit is on its way to the agent
  }
  auto& samples = worker.samples;
  if (!samples.empty() && *ticks < samples.back().ticks) {
    samples.clear();  // a descendant ended unreaped: the tree changed, which is activity
    worker.last_cpu = now;
  }
  if (!samples.empty() && *ticks > samples.back().ticks) {
    worker.last_cpu = now;
  }
  samples.push_back({now, *ticks});
  // Keep one sample at or before the start of the window.
  while (samples.size() > 1 && samples[1].time <= now - timeout_) {
    samples.pop_front();
  }
  const bool whole_window = samples.front().time <= now - timeout_;
  const bool idle_cpu = *ticks - samples.front().ticks <= allowance_ticks_;
  const bool silent = worker.last_output <= now - timeout_;
  return whole_window && idle_cpu && silent;
}

void HangWatch::tick() {
  const auto now = Clock::now();
  std::size_t quietest = 0;
  const Watched* chosen = nullptr;
  for (auto& [index, worker] : watched_) {
    if (worker.reported || !quiet(worker, now)) {
      continue;
    }
    if (chosen == nullptr || lastActive(worker) < lastActive(*chosen)) {
      chosen = &worker;
      quietest = index;
    }
  }
  if (chosen != nullptr && on_hung_(quietest, chosen->pid)) {
    watched_[quietest].reported = true;
  }
}

}  // namespace ddprun::launcher

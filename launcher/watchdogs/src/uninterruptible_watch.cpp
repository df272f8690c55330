#include "uninterruptible_watch.hpp"

#include <algorithm>

#include "ddprun/launcher/supervision/procfs.hpp"

namespace ddprun::launcher {
namespace {

using std::chrono::milliseconds;

// torch's --monitor-interval default, at which it reads the workers' state.
constexpr milliseconds kCloseLook{100};

milliseconds periodFor(milliseconds timeout) {
  return std::clamp(timeout / 4, kCloseLook, milliseconds(1000));
}

}  // namespace

UninterruptibleWatch::UninterruptibleWatch(net::asio::io_context& io, milliseconds timeout,
                                           OnStuck on_stuck)
    : timeout_(timeout),
      period_(periodFor(timeout)),
      on_stuck_(std::move(on_stuck)),
      timer_(
          io, [this] { return nextLook(); },
          [this] {
            look();
            return !stopped_ && !watched_.empty();
          }) {}

void UninterruptibleWatch::watch(std::size_t index, pid_t pid) {
  if (stopped_) {
    return;
  }
  watched_[index] = Watched{pid, std::nullopt, false};
  arm();
}

void UninterruptibleWatch::forget(std::size_t index) { watched_.erase(index); }

void UninterruptibleWatch::clear() {
  watched_.clear();
  timer_.cancel();
}

void UninterruptibleWatch::stop() {
  stopped_ = true;
  clear();
}

milliseconds UninterruptibleWatch::nextLook() const {
  const bool any_in_d = std::any_of(watched_.begin(), watched_.end(), [](const auto& entry) {
    return entry.second.in_d_since.has_value();
  });
  return any_in_d ? kCloseLook : period_;
}

void UninterruptibleWatch::arm() {
  if (!stopped_ && !watched_.empty()) {
    timer_.start();
  }
}

void UninterruptibleWatch::look() {
  const Clock::time_point now = Clock::now();
  for (auto& [index, worker] : watched_) {
    const auto stat = readProcStat(worker.pid);
    if (!stat || stat->state != 'D') {
      worker.in_d_since.reset();  // gone (its exit is on its way), or out of D
      continue;
    }
    if (!worker.in_d_since) {
      worker.in_d_since = now;
    }
    const auto in_d = std::chrono::duration_cast<milliseconds>(now - *worker.in_d_since);
    if (!worker.reported && in_d >= timeout_) {
      worker.reported = on_stuck_(index, worker.pid, in_d);
    }
  }
}

}  // namespace ddprun::launcher

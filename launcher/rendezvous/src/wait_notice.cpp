#include "ddprun/launcher/rendezvous/wait_notice.hpp"

#include <algorithm>
#include <cstdio>

#include "ddprun/launcher/core/log.hpp"

namespace ddprun::launcher {

WaitNotice::WaitNotice(std::function<std::string()> what, Clock::time_point deadline,
                       Duration period)
    : what_(std::move(what)),
      deadline_(deadline),
      period_(period),
      next_notice_(Clock::now() + kFirstNotice) {}

void WaitNotice::tick() {
  const auto now = Clock::now();
  if (now < next_notice_ || now >= deadline_) {
    return;
  }
  next_notice_ = now + period_;
  const std::string what = what_();
  if (what.empty()) {
    return;
  }
  const auto left = std::chrono::duration_cast<Duration>(deadline_ - now);
  if (detail_.empty()) {
    log().info("waiting for {} ({} left)", what, describeSeconds(left));
  } else {
    log().info("waiting for {} ({} left; {})", what, describeSeconds(left), detail_);
  }
}

WaitNotice::Duration WaitNotice::next() const {
  const auto until = std::min(next_notice_, deadline_);
  return std::max(Duration(1), std::chrono::duration_cast<Duration>(until - Clock::now()));
}

std::string describeSeconds(std::chrono::milliseconds duration) {
  const auto ms = duration.count();
  char text[32];
  if (ms % 1000 == 0 || ms >= 10'000) {
    std::snprintf(text, sizeof text, "%lld s", static_cast<long long>((ms + 500) / 1000));
  } else {
    std::snprintf(text, sizeof text, "%.1f s", static_cast<double>(ms) / 1000.0);
  }
  return text;
}

}  // namespace ddprun::launcher

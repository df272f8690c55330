#include "ddprun/launcher/core/progress_timeout.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>

#include "ddprun/launcher/core/option_values.hpp"

namespace ddprun::launcher {
namespace {

// Seconds as a positive, finite number of milliseconds (at least 1).
std::optional<ProgressTimeout::Duration> parseSeconds(std::string_view text) {
  double seconds = 0;
  const char* end = text.data() + text.size();
  const auto [stop, error] = std::from_chars(text.data(), end, seconds);
  if (text.empty() || error != std::errc() || stop != end || !std::isfinite(seconds) ||
      seconds <= 0 || seconds > 1e9) {
    return std::nullopt;
  }
  return ProgressTimeout::Duration(std::max<long long>(1, std::llround(seconds * 1000)));
}

}  // namespace

ProgressTimeout ProgressTimeout::fixed(Duration timeout) {
  ProgressTimeout chosen;
  chosen.fixed_ = timeout;
  return chosen;
}

ProgressTimeout ProgressTimeout::automatic(Duration floor) {
  ProgressTimeout chosen;
  chosen.automatic_ = true;
  chosen.floor_ = floor;
  return chosen;
}

void ProgressTimeout::intervalSeen(Duration interval) {
  if (!longest_ || interval > *longest_) {
    longest_ = interval;
  }
}

ProgressTimeout::Duration ProgressTimeout::after(int reports) const {
  if (!automatic_) {
    return fixed_;
  }
  const Duration learned = std::max(floor_, longest_ ? *longest_ * kAutoMultiple : floor_);
  return reports <= 1 ? learned * kFirstStepFactor : learned;
}

std::string ProgressTimeout::describe(int reports) const {
  std::string chosen = formatSeconds(after(reports));
  if (!automatic_) {
    return chosen;
  }
  std::string how = "auto: " + chosen + " (";
  if (longest_) {
    how += std::to_string(kAutoMultiple) + " × the longest interval seen, " +
           formatSeconds(*longest_) + ", at least " + formatSeconds(floor_);
  } else {
    how += "no interval seen yet; the floor is " + formatSeconds(floor_);
  }
  if (reports <= 1) {
    how += "; " + std::to_string(kFirstStepFactor) + " × that for the first step of an attempt";
  }
  return how + ")";
}

ProgressTimeout parseProgressTimeout(std::string_view what, std::string_view text) {
  constexpr std::string_view kAuto = "auto";
  if (text.substr(0, kAuto.size()) == kAuto) {
    const std::string_view rest = text.substr(kAuto.size());
    if (rest.empty()) {
      return ProgressTimeout::automatic();
    }
    if (rest.front() == ':') {
      if (const auto floor = parseSeconds(rest.substr(1))) {
        return ProgressTimeout::automatic(*floor);
      }
    }
    failValue(what, text, "'auto' takes an optional floor in seconds, as in auto:120");
  }
  if (const auto seconds = parseSeconds(text)) {
    return ProgressTimeout::fixed(*seconds);
  }
  failValue(what, text, "expected a number of seconds greater than 0, or auto[:FLOOR_SECONDS]");
}

}  // namespace ddprun::launcher

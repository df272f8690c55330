#include "ddprun/launcher/rendezvous/clock_sync.hpp"

#include <unistd.h>

#include <array>
#include <fstream>
#include <nlohmann/json.hpp>

#include "ddprun/launcher/core/environment.hpp"
#include "ddprun/proto/json_parse.hpp"
#include "ddprun/proto/rendezvous_protocol.hpp"
#include "ddprun/rendezvous/client.hpp"

namespace ddprun::launcher {
namespace {

using Clock = std::chrono::steady_clock;
namespace protocol = proto::rendezvous;

// {"steady_ns": N} -> N; nullopt for anything else (an older rendezvous
// answers a query with an empty value, or {"error": ...}).
std::optional<std::int64_t> steadyNanoseconds(const std::string& answer) {
  const nlohmann::json parsed = proto::parseJson(answer);
  if (!parsed.is_object() || !parsed.contains("steady_ns") ||
      !parsed["steady_ns"].is_number_integer()) {
    return std::nullopt;
  }
  return parsed["steady_ns"].get<std::int64_t>();
}

}  // namespace

std::optional<ClockSample> sampleClock(rdzv::StoreClient& client) {
  static const std::string key = protocol::queryKey(protocol::kQueryClock);
  const Clock::time_point sent = Clock::now();
  const std::string answer = client.query(key);
  const Clock::time_point received = Clock::now();
  const auto theirs = steadyNanoseconds(answer);
  if (!theirs) {
    return std::nullopt;
  }
  const auto round_trip = received - sent;
  const auto midpoint = sent.time_since_epoch() + round_trip / 2;
  return ClockSample{std::chrono::nanoseconds(*theirs) - midpoint, round_trip};
}

void BestClockSample::offer(const ClockSample& sample) {
  if (!best_ || sample.round_trip < best_->round_trip) {
    best_ = sample;
  }
}

ClockOffset BestClockSample::offset(std::string reference) const {
  return {best_->offset, best_->round_trip, std::move(reference)};
}

std::optional<ClockOffset> measureClockOffset(rdzv::StoreClient& client, int samples,
                                              std::string reference) {
  BestClockSample best;
  for (int i = 0; i < samples; ++i) {
    const auto sample = sampleClock(client);
    if (!sample) {
      return std::nullopt;
    }
    best.offer(*sample);
  }
  if (best.empty()) {
    return std::nullopt;
  }
  return best.offset(std::move(reference));
}

void ClockWatch::watch(Callback measured) {
  std::lock_guard lock(mutex_);
  callback_ = std::move(measured);
  if (callback_ && latest_) {
    callback_(*latest_);
  }
}

void ClockWatch::measured(const ClockOffset& offset) {
  std::lock_guard lock(mutex_);
  latest_ = offset;
  if (callback_) {
    callback_(offset);
  }
}

ClockOffset ownClock() {
  std::string boot;
  std::ifstream("/proc/sys/kernel/random/boot_id") >> boot;
  return {std::chrono::nanoseconds(0), std::chrono::nanoseconds(0),
          "the monotonic clock of " + thisHostName() + (boot.empty() ? "" : ", boot " + boot)};
}

}  // namespace ddprun::launcher

// Measuring this agent's clock against the rendezvous' (ClockOffset), as NTP
// does: each sample asks the rendezvous its monotonic clock
// (proto::rendezvous::kQueryClock, one GET) between two readings of ours;
// the rendezvous read its clock somewhere within that round trip, so the
// offset is its answer minus our midpoint, wrong by at most half the round
// trip. Of several samples the one with the shortest round trip is kept
// (the others waited in a queue somewhere), and its round trip is reported
// as the uncertainty.
//
// ClockWatch hands a backend's measurements to whoever watches them
// (Rendezvous::watchClock). Any thread; its callback runs under its lock,
// so unregistering waits for a call in progress.
#pragma once

#include <functional>
#include <mutex>
#include <optional>
#include <string>

#include "ddprun/launcher/core/rendezvous.hpp"

namespace ddprun::rdzv {
class StoreClient;
}

namespace ddprun::launcher {

// How many samples one measurement takes.
inline constexpr int kClockSamples = 8;

struct ClockSample {
  std::chrono::nanoseconds offset{0};
  std::chrono::nanoseconds round_trip{0};
};

// One sample over `client`, a connection to a rendezvous (ddprund, an agent
// that embeds it, static node 0's store). nullopt: it does not tell its
// clock (an older ddprund answers an empty value). Throws what the client
// throws when the connection fails.
std::optional<ClockSample> sampleClock(rdzv::StoreClient& client);

// The best of the samples offered so far: the shortest round trip.
class BestClockSample {
 public:
  void offer(const ClockSample& sample);
  bool empty() const { return !best_; }
  ClockOffset offset(std::string reference) const;  // not empty()

 private:
  std::optional<ClockSample> best_;
};

// `samples` samples in a row; nullopt when the rendezvous does not tell its
// clock. Throws what the client throws.
std::optional<ClockOffset> measureClockOffset(rdzv::StoreClient& client, int samples,
                                              std::string reference);

class ClockWatch {
 public:
  using Callback = std::function<void(const ClockOffset&)>;

  // Registers `measured` (empty: unregisters); the newest measurement so far,
  // if any, is passed to it at once.
  void watch(Callback measured);
  // A new measurement: kept, and passed on.
  void measured(const ClockOffset& offset);

 private:
  std::mutex mutex_;
  Callback callback_;
  std::optional<ClockOffset> latest_;
};

// This host's CLOCK_MONOTONIC, for an agent with no rendezvous to ask
// (--standalone): offset 0, and a reference naming the host's boot, the
// clock's lifetime, so that agents of one host and boot share it.
ClockOffset ownClock();

}  // namespace ddprun::launcher

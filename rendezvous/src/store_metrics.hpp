// What ddprund's store counts for its metrics, and how a scrape reads it.
//
// The request path takes no lock and looks nothing up for them: each server
// thread owns one ThreadMetrics, which only that thread's sessions write
// (single-writer relaxed atomics: a plain add), and a scrape sums every
// thread's on the metrics endpoint's thread. What lives under the store lock
// (keys, bytes, waiters, the rendezvous) is read under it, once per scrape.
#pragma once

#include <array>
#include <cstddef>
#include <span>

#include "ddprun/metrics/exposition.hpp"
#include "ddprun/metrics/histogram.hpp"
#include "ddprun/proto/tcpstore_wire.hpp"

namespace ddprun::rdzv {

class StoreState;

// Why a client's connection ended; a label of ddprund_connections_closed_total.
enum class CloseReason {
  kPeerClosed,      // the client closed it between requests
  kPeerLost,        // reset mid-request, or a read or write failed
  kBadRequest,      // a request ddprund refuses (malformed, over a limit, not allowed)
  kRequestTimeout,  // a request left incomplete for --request-timeout
  kNotReading,      // its replies stayed unread for --request-timeout
  kShutdown,        // ddprund stopped
};
inline constexpr std::size_t kCloseReasons = 6;
inline constexpr std::size_t kCommands = static_cast<std::size_t>(proto::Command::List) + 1;
inline constexpr std::size_t kDialects = 4;  // proto::Dialect, Undecided included

// One server thread's counts. Written by that thread only; read by any.
struct alignas(64) ThreadMetrics {
  ThreadMetrics();

  std::array<metrics::SingleWriterCounter, kDialects> open_by_dialect;
  metrics::SingleWriterCounter opened;
  std::array<metrics::SingleWriterCounter, kCloseReasons> closed;
  std::array<metrics::SingleWriterCounter, kCommands> requests;
  // From the read that completed a request to its reply queued.
  metrics::Histogram request_seconds;
};

// The sessions' families, summed over `threads`. Any thread, no lock.
void collectSessionMetrics(std::span<const ThreadMetrics* const> threads, metrics::Exposition& out);
// Keys, bytes and waiters of every key space. Store lock held.
void collectStoreMetrics(const StoreState& state, metrics::Exposition& out);

}  // namespace ddprun::rdzv

#include "store_metrics.hpp"

#include <cctype>
#include <string>

#include "ddprun/rendezvous/store_state.hpp"

namespace ddprun::rdzv {
namespace {

using metrics::MetricType;

// Seconds; most requests take a few microseconds, a contended lock more.
constexpr double kRequestBuckets[] = {5e-6,   1e-5, 2.5e-5, 5e-5,   1e-4, 2.5e-4, 5e-4, 1e-3,
                                      2.5e-3, 5e-3, 1e-2,   2.5e-2, 5e-2, 0.1,    0.25, 1};

constexpr const char* kCloseReasonNames[kCloseReasons] = {
    "peer_closed", "peer_lost", "bad_request", "request_timeout", "not_reading", "shutdown"};

// "COMPARE_SET" -> "compare_set": label values in Prometheus' usual case.
std::string commandLabel(proto::Command command) {
  std::string label(proto::commandName(command));
  for (char& c : label) {
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return label;
}

template <std::size_t N>
std::array<std::uint64_t, N> sum(
    std::span<const ThreadMetrics* const> threads,
    const std::array<metrics::SingleWriterCounter, N> ThreadMetrics::*member) {
  std::array<std::uint64_t, N> total{};
  for (const ThreadMetrics* thread : threads) {
    for (std::size_t i = 0; i < N; ++i) {
      total[i] += (thread->*member)[i].value();
    }
  }
  return total;
}

}  // namespace

ThreadMetrics::ThreadMetrics() : request_seconds(kRequestBuckets) {}

void collectSessionMetrics(std::span<const ThreadMetrics* const> threads,
                           metrics::Exposition& out) {
  const auto open = sum(threads, &ThreadMetrics::open_by_dialect);
  auto& connections = out.family("ddprund_connections", MetricType::kGauge,
                                 "Open client connections, by the PyTorch dialect they speak "
                                 "(undecided until their first request).");
  for (std::size_t i = 0; i < kDialects; ++i) {
    connections.sample(
        static_cast<double>(open[i]),
        {{"dialect", std::string(proto::dialectName(static_cast<proto::Dialect>(i)))}});
  }
  std::uint64_t opened = 0;
  metrics::HistogramSnapshot latency;
  for (const ThreadMetrics* thread : threads) {
    opened += thread->opened.value();
    latency.add(thread->request_seconds.snapshot());
  }
  out.family("ddprund_connections_opened_total", MetricType::kCounter,
             "Client connections accepted.")
      .sample(static_cast<double>(opened));
  const auto closed = sum(threads, &ThreadMetrics::closed);
  auto& closed_family = out.family("ddprund_connections_closed_total", MetricType::kCounter,
                                   "Client connections ended, by why.");
  for (std::size_t i = 0; i < kCloseReasons; ++i) {
    closed_family.sample(static_cast<double>(closed[i]), {{"reason", kCloseReasonNames[i]}});
  }
  const auto requests = sum(threads, &ThreadMetrics::requests);
  auto& requests_family = out.family("ddprund_requests_total", MetricType::kCounter,
                                     "Store requests received, by command.");
  for (std::size_t i = 0; i < kCommands; ++i) {
    requests_family.sample(static_cast<double>(requests[i]),
                           {{"command", commandLabel(static_cast<proto::Command>(i))}});
  }
  out.family("ddprund_request_duration_seconds", MetricType::kHistogram,
             "From the read that completed a store request to its reply queued (a WAIT: to its "
             "registration), the store lock's wait included.")
      .histogram(latency);
}

void collectStoreMetrics(const StoreState& state, metrics::Exposition& out) {
  const KeySpace::Footprint held = state.footprint();
  out.family("ddprund_keys", MetricType::kGauge, "Keys holding a value or a queue.")
      .sample(static_cast<double>(held.keys));
  out.family("ddprund_stored_bytes", MetricType::kGauge,
             "Bytes of the keys, values and queued items held.")
      .sample(static_cast<double>(held.bytes));
  out.family("ddprund_waiting_clients", MetricType::kGauge,
             "Clients blocked in a WAIT (or a blocking GET).")
      .sample(static_cast<double>(held.waiting_clients));
}

}  // namespace ddprun::rdzv

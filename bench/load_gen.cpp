#include "load_gen.hpp"

#include <algorithm>
#include <atomic>
#include <exception>
#include <filesystem>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <vector>

#include "machine.hpp"

namespace ddprun::bench {
namespace {

using Clock = std::chrono::steady_clock;

// Setup: connecting; no client starts its loop until all are connected.
enum class Phase : int { Setup, Warmup, Measure, Stop };

// Shared by the client threads of one load point.
struct SharedState {
  std::atomic<Phase> phase{Phase::Setup};
  std::atomic<int> connected{0};
  std::atomic<int> failed{0};
  std::mutex error_mutex;
  std::string first_error;

  // c10 errors carry a multi-line backtrace; the first line says enough.
  void recordError(const std::string& what) {
    failed.fetch_add(1);
    std::lock_guard lock(error_mutex);
    if (first_error.empty()) {
      first_error = what.substr(0, what.find('\n'));
    }
  }
};

// Keys a client cycles through: its own, so clients never contend on a key
// and every get finds its key set one operation earlier.
constexpr int kKeysPerClient = 8;

class ClientWorker {
 public:
  ClientWorker(int id, const LoadOptions& options, SharedState& shared)
      : id_(id), options_(options), shared_(shared), value_(options.value_bytes, 0x5a) {
    latencies_ns_.reserve(4096);
    for (int k = 0; k < kKeysPerClient; ++k) {
      keys_.push_back("bench/" + std::to_string(id) + "/" + std::to_string(k));
    }
    counter_ = "bench/" + std::to_string(id) + "/n";
  }

  void run() {
    std::unique_ptr<c10d::TCPStore> store;
    try {
      store = connect();
      // connect() returns once the kernel has queued the connection; one
      // round trip proves the server has accepted it. Without this, and
      // without holding every client until all are ready, the last
      // connections wait seconds in the accept queue while the first
      // clients already load the server, and those stalls land in the
      // measured window (the barrier measures connection storms instead).
      store->check({counter_});
    } catch (const std::exception& error) {
      shared_.recordError("client " + std::to_string(id_) + " connect: " + error.what());
      return;
    }
    shared_.connected.fetch_add(1);
    shared_.phase.wait(Phase::Setup);  // the main thread always moves on
    try {
      loop(*store);
    } catch (const std::exception& error) {
      shared_.recordError("client " + std::to_string(id_) + ": " + error.what());
    }
  }

  std::vector<std::int64_t>& latencies() { return latencies_ns_; }

 private:
  std::unique_ptr<c10d::TCPStore> connect() {
    c10d::TCPStoreOptions store_options;
    store_options.port = options_.port;
    store_options.isServer = false;
    store_options.waitWorkers = false;  // numWorkers unset: no init/ barrier
    store_options.timeout = options_.client_timeout;
    return std::make_unique<c10d::TCPStore>(options_.host, store_options);
  }

  void loop(c10d::TCPStore& store) {
    std::uint64_t op = 0;
    // An operation counts when it completes inside the measured window, so
    // one that started during warm-up and stalled still shows in the tail.
    while (true) {
      const auto start = Clock::now();
      doOp(store, op++);
      const auto end = Clock::now();
      const Phase phase = shared_.phase.load(std::memory_order_relaxed);
      if (phase == Phase::Stop) {
        break;
      }
      if (phase == Phase::Measure) {
        latencies_ns_.push_back(
            std::chrono::duration_cast<std::chrono::nanoseconds>(end - start).count());
      }
    }
  }

  // 25% each of set, get, add and check; a get always follows the set of the
  // same key, so it never waits for a missing key.
  void doOp(c10d::TCPStore& store, std::uint64_t op) {
    const std::string& key = keys_[(op / 4) % kKeysPerClient];
    switch (op % 4) {
      case 0:
        store.set(key, value_);
        break;
      case 1:
        if (store.get(key).size() != value_.size()) {
          throw std::runtime_error("get: wrong size");
        }
        break;
      case 2:
        store.add(counter_, 1);
        break;
      default:
        if (!store.check({key})) {
          throw std::runtime_error("check: key missing");
        }
        break;
    }
  }

  int id_;
  const LoadOptions& options_;
  SharedState& shared_;
  std::vector<std::uint8_t> value_;
  std::vector<std::string> keys_;
  std::string counter_;
  std::vector<std::int64_t> latencies_ns_;
};

// Entries in a /proc directory, e.g. this process's threads or open fds.
int countEntries(const char* directory) {
  std::error_code error;
  int count = 0;
  for (auto it = std::filesystem::directory_iterator(directory, error);
       !error && it != std::filesystem::directory_iterator(); it.increment(error)) {
    ++count;
  }
  return count;
}

double percentileUs(std::vector<std::int64_t>& samples, double fraction) {
  if (samples.empty()) {
    return 0.0;
  }
  const auto index = static_cast<std::size_t>(fraction * static_cast<double>(samples.size() - 1));
  std::nth_element(samples.begin(), samples.begin() + static_cast<std::ptrdiff_t>(index),
                   samples.end());
  return static_cast<double>(samples[index]) / 1000.0;
}

// Waits until every client has connected or failed; false on timeout.
bool waitForClients(const SharedState& shared, int clients, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (shared.connected.load() + shared.failed.load() < clients) {
    if (Clock::now() >= deadline) {
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}

void mergeLatencies(std::vector<std::unique_ptr<ClientWorker>>& workers, LoadResult& result) {
  std::vector<std::int64_t> all;
  result.min_client_ops = workers.empty() ? 0 : UINT64_MAX;
  for (auto& worker : workers) {
    const auto& mine = worker->latencies();
    all.insert(all.end(), mine.begin(), mine.end());
    result.min_client_ops = std::min<std::uint64_t>(result.min_client_ops, mine.size());
    result.max_client_ops = std::max<std::uint64_t>(result.max_client_ops, mine.size());
  }
  result.ops = all.size();
  result.ops_per_second = result.seconds > 0 ? static_cast<double>(all.size()) / result.seconds : 0;
  result.p50_us = percentileUs(all, 0.50);
  result.p90_us = percentileUs(all, 0.90);
  result.p99_us = percentileUs(all, 0.99);
  result.p999_us = percentileUs(all, 0.999);
  result.max_us = percentileUs(all, 1.0);
}

// Releases the clients, warms up, then measures one window: its length and
// who used the CPU during it (the server, this process, everyone else).
void measureWindow(SharedState& shared, const LoadOptions& options, LoadResult& result) {
  auto serverCpu = [&options] {
    return options.server_cpu_seconds ? options.server_cpu_seconds() : 0.0;
  };
  shared.phase.store(Phase::Warmup);
  shared.phase.notify_all();
  std::this_thread::sleep_for(options.warmup);
  const double server0 = serverCpu();
  const double bench0 = processCpuSeconds();
  const double machine0 = machineBusySeconds();
  const auto start = Clock::now();
  shared.phase.store(Phase::Measure);
  std::this_thread::sleep_for(options.duration);
  shared.phase.store(Phase::Stop);
  result.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  result.server_cpu = (serverCpu() - server0) / result.seconds;
  result.bench_cpu = (processCpuSeconds() - bench0) / result.seconds;
  const double machine = (machineBusySeconds() - machine0) / result.seconds;
  result.other_cpu = std::max(0.0, machine - result.server_cpu - result.bench_cpu);
}

}  // namespace

LoadResult runLoad(const LoadOptions& options) {
  LoadResult result;
  result.clients = options.clients;
  SharedState shared;
  std::vector<std::unique_ptr<ClientWorker>> workers;
  std::vector<std::thread> threads;
  for (int i = 0; i < options.clients; ++i) {
    workers.push_back(std::make_unique<ClientWorker>(i, options, shared));
  }

  const auto setup_start = Clock::now();
  for (auto& worker : workers) {
    threads.emplace_back([&worker] { worker->run(); });
  }
  const bool all_ready = waitForClients(shared, options.clients, options.setup_timeout);
  result.setup_seconds = std::chrono::duration<double>(Clock::now() - setup_start).count();

  result.threads = countEntries("/proc/self/task");
  result.open_fds = countEntries("/proc/self/fd");
  if (all_ready && shared.failed.load() == 0) {
    measureWindow(shared, options, result);
  } else if (!all_ready) {
    shared.recordError("clients did not all connect within " +
                       std::to_string(options.setup_timeout.count()) + " ms");
  }
  shared.phase.store(Phase::Stop);
  shared.phase.notify_all();
  for (auto& thread : threads) {
    thread.join();
  }

  mergeLatencies(workers, result);
  result.errors = static_cast<std::uint64_t>(shared.failed.load());
  result.first_error = shared.first_error;
  return result;
}

}  // namespace ddprun::bench

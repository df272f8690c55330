// What `ddprun --metrics-port` shows of this agent: an AgentEvents observer
// that keeps the agent's numbers (its attempt, world, local workers by
// state, restarts, failures, rendezvous waits, the last exit code) for the
// metrics endpoint's scrapes. Names and meanings: README "Metrics".
//
// Threads: the agent's loop calls the AgentEvents methods; the metrics
// endpoint's thread calls collect(). One small mutex guards the numbers, held
// only to change or copy a few of them, so the loop never waits for a
// scrape's formatting. Owns nothing else; outlives the Agent it observes and
// the endpoint that reads it.
#pragma once

#include <array>
#include <cstdint>
#include <mutex>
#include <optional>

#include "ddprun/launcher/core/agent_events.hpp"
#include "ddprun/metrics/exposition.hpp"
#include "ddprun/metrics/histogram.hpp"

namespace ddprun::launcher {

class AgentMetrics final : public AgentEvents {
 public:
  // `info`: the labels of ddprun_agent_info, fixed for the run (the host,
  // the run id, the backend).
  AgentMetrics(int nproc_per_node, int max_restarts, metrics::Labels info);

  void rendezvousStarted(Clock::time_point at) override;
  void roundJoined(const WorkerGroup& group, Clock::duration waited, Clock::time_point at) override;
  void workerStarted(int local_rank, int rank, pid_t pid, Clock::time_point at) override;
  void workerExited(int local_rank, int rank, pid_t pid, const ExitStatus& status, bool failed,
                    Clock::time_point at) override;
  void groupStopping(StopReason reason, Clock::time_point at) override;
  void restarting(int restarts_used, int max_restarts, Clock::time_point at) override;
  void finished(int exit_code, Clock::time_point at) override;

  // The agent's families, as of now. Any thread.
  void collect(metrics::Exposition& out) const;

 private:
  // Everything a scrape shows, copied out under the mutex.
  struct Numbers {
    bool waiting = false;              // for the rendezvous's next group
    std::optional<WorkerGroup> group;  // the last group joined
    int running = 0;                   // this group's workers, by state
    int exited = 0;                    // succeeded, or stopped by the agent
    int failed = 0;
    std::uint64_t workers_started = 0;  // counters: since ddprun started
    std::uint64_t worker_failures = 0;
    std::uint64_t rounds_joined = 0;
    std::uint64_t restarts = 0;
    std::array<std::uint64_t, 4> stops{};  // by StopReason
    std::optional<double> last_wait_seconds;
    std::optional<int> last_worker_exit_code;
    std::optional<int> exit_code;  // ddprun's, once the run is over
  };

  void collectGroup(const Numbers& numbers, metrics::Exposition& out) const;
  void collectCounters(const Numbers& numbers, metrics::Exposition& out) const;

  const int nproc_per_node_;
  const int max_restarts_;
  const metrics::Labels info_;
  mutable std::mutex mutex_;
  Numbers numbers_;                      // mutex_
  metrics::Histogram rendezvous_waits_;  // written under mutex_
};

}  // namespace ddprun::launcher

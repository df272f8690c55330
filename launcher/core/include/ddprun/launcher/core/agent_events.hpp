// What happens in an agent's life, told as it happens to whoever watches it
// from outside (the metrics endpoint, the timeline file). The agent calls
// each method on its loop thread, in order, at the moment it happens; an
// observer records and returns at once: it must never block the loop, nor
// throw. Every method has an empty default, so an observer overrides only
// what it needs.
//
// One object is the agent's (AgentConfig::events, null: nobody watches);
// AgentEventsFanOut tells several.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "ddprun/launcher/core/rendezvous.hpp"
#include "ddprun/launcher/process/subprocess.hpp"

namespace ddprun::launcher {

class AgentEvents {
 public:
  using Clock = std::chrono::steady_clock;

  // Why a running group is being stopped.
  enum class StopReason {
    kFailure,    // a worker failed (restarted if restarts are left)
    kRoundOver,  // the rendezvous moved on: a node was lost or arrived
    kSignal,     // ddprun was told to stop
    kError,      // the agent cannot go on (result.error)
  };

  virtual ~AgentEvents() = default;

  // The agent asks the rendezvous for its next group.
  virtual void rendezvousStarted(Clock::time_point /*at*/) {}
  // The rendezvous answered with `group`, `waited` after rendezvousStarted.
  virtual void roundJoined(const WorkerGroup& /*group*/, Clock::duration /*waited*/,
                           Clock::time_point /*at*/) {}
  virtual void workerStarted(int /*local_rank*/, int /*rank*/, pid_t /*pid*/,
                             Clock::time_point /*at*/) {}
  // `failed`: counted as a failure (not one the agent's own stop caused).
  virtual void workerExited(int /*local_rank*/, int /*rank*/, pid_t /*pid*/,
                            const ExitStatus& /*status*/, bool /*failed*/,
                            Clock::time_point /*at*/) {}
  // A watchdog judged the worker hung (`reason`), and every stack it could
  // take was taken: `where` says where each rank's is (this node's, then the
  // other nodes'). It is killed next.
  virtual void workerHung(int /*local_rank*/, int /*rank*/, const std::string& /*reason*/,
                          const std::string& /*where*/, Clock::time_point /*at*/) {}
  virtual void groupStopping(StopReason /*reason*/, Clock::time_point /*at*/) {}
  // Failed workers are restarted: `restarts_used` of `max_restarts` now.
  virtual void restarting(int /*restarts_used*/, int /*max_restarts*/, Clock::time_point /*at*/) {}
  // The run is over; ddprun exits with `exit_code`.
  virtual void finished(int /*exit_code*/, Clock::time_point /*at*/) {}
};

std::string_view stopReasonName(AgentEvents::StopReason reason);

// Tells every observer it holds, in order. Holds them borrowed.
class AgentEventsFanOut : public AgentEvents {
 public:
  void add(AgentEvents* observer) { observers_.push_back(observer); }

  void rendezvousStarted(Clock::time_point at) override;
  void roundJoined(const WorkerGroup& group, Clock::duration waited, Clock::time_point at) override;
  void workerStarted(int local_rank, int rank, pid_t pid, Clock::time_point at) override;
  void workerExited(int local_rank, int rank, pid_t pid, const ExitStatus& status, bool failed,
                    Clock::time_point at) override;
  void workerHung(int local_rank, int rank, const std::string& reason, const std::string& where,
                  Clock::time_point at) override;
  void groupStopping(StopReason reason, Clock::time_point at) override;
  void restarting(int restarts_used, int max_restarts, Clock::time_point at) override;
  void finished(int exit_code, Clock::time_point at) override;

 private:
  std::vector<AgentEvents*> observers_;
};

}  // namespace ddprun::launcher

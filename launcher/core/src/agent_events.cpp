#include "ddprun/launcher/core/agent_events.hpp"

namespace ddprun::launcher {

std::string_view stopReasonName(AgentEvents::StopReason reason) {
  switch (reason) {
    case AgentEvents::StopReason::kFailure:
      return "failure";
    case AgentEvents::StopReason::kRoundOver:
      return "round over";
    case AgentEvents::StopReason::kSignal:
      return "signal";
    case AgentEvents::StopReason::kError:
      return "error";
  }
  return "unknown";
}

void AgentEventsFanOut::rendezvousStarted(Clock::time_point at) {
  for (AgentEvents* observer : observers_) {
    observer->rendezvousStarted(at);
  }
}

void AgentEventsFanOut::roundJoined(const WorkerGroup& group, Clock::duration waited,
                                    Clock::time_point at) {
  for (AgentEvents* observer : observers_) {
    observer->roundJoined(group, waited, at);
  }
}

void AgentEventsFanOut::workerStarted(int local_rank, int rank, pid_t pid, Clock::time_point at) {
  for (AgentEvents* observer : observers_) {
    observer->workerStarted(local_rank, rank, pid, at);
  }
}

void AgentEventsFanOut::workerHung(int local_rank, int rank, const std::string& reason,
                                   const std::string& where, Clock::time_point at) {
  for (AgentEvents* observer : observers_) {
    observer->workerHung(local_rank, rank, reason, where, at);
  }
}

void AgentEventsFanOut::workerExited(int local_rank, int rank, pid_t pid, const ExitStatus& status,
                                     bool failed, Clock::time_point at) {
  for (AgentEvents* observer : observers_) {
    observer->workerExited(local_rank, rank, pid, status, failed, at);
  }
}

void AgentEventsFanOut::groupStopping(StopReason reason, Clock::time_point at) {
  for (AgentEvents* observer : observers_) {
    observer->groupStopping(reason, at);
  }
}

void AgentEventsFanOut::restarting(int restarts_used, int max_restarts, Clock::time_point at) {
  for (AgentEvents* observer : observers_) {
    observer->restarting(restarts_used, max_restarts, at);
  }
}

void AgentEventsFanOut::finished(int exit_code, Clock::time_point at) {
  for (AgentEvents* observer : observers_) {
    observer->finished(exit_code, at);
  }
}

}  // namespace ddprun::launcher

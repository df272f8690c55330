// torchrun's events for `--event-log-handler console`: each event of the
// agent's life as one line of torchrun's Event JSON
// (torch.distributed.elastic.events.Event: name, source, timestamp,
// metadata) on ddprun's stderr, so a tool that reads torchrun's console
// events reads ddprun's.
//
// torchrun itself prints only one event there, the agent's SUCCEEDED or
// FAILED at the end (its rendezvous and worker events go to a handler that
// drops them). ddprun prints, with torchrun's names and metadata:
//   AGENT  torchelastic.worker.status.RENDEZVOUS  a round joined (duration_ms: the wait)
//   WORKER torchelastic.worker.status.STARTED     a worker spawned (worker_id: its pid)
//   WORKER ...SUCCEEDED | FAILED | TERMINATED     a worker's end (TERMINATED: stopped by
//                                                 the agent, as torchrun says)
//   WORKER ...UNHEALTHY                           a watchdog judged it hung (raw_error: why)
//   AGENT  ...RESTARTING                          failed workers are restarted
//   AGENT  ...SUCCEEDED | FAILED                  the end: SUCCEEDED only for exit status 0
// (torchrun's agent SUCCEEDED means only that its loop returned, even when
// workers failed; ddprun's says whether the job did.)
//
// Owns nothing but what it knows of the job. The AgentEvents calls come on
// the agent's loop thread; each line is one write(), so it stays whole
// beside the workers' relayed lines.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "ddprun/launcher/core/agent_events.hpp"

namespace ddprun::launcher {

class TorchEventLog final : public AgentEvents {
 public:
  // What every event says of the job.
  struct Job {
    std::string run_id;
    std::string role = "default";
    std::string host;  // torchrun's hostname: the fully qualified name
    std::string rdzv_backend;
    std::string entry_point;  // the interpreter, or the executable with --no-python
    int max_restarts = 0;
  };

  // Writes to `fd` (borrowed): ddprun's stderr in a run.
  TorchEventLog(Job job, int fd);

  void roundJoined(const WorkerGroup& group, Clock::duration waited, Clock::time_point at) override;
  void workerStarted(int local_rank, int rank, pid_t pid, Clock::time_point at) override;
  void workerExited(int local_rank, int rank, pid_t pid, const ExitStatus& status, bool failed,
                    Clock::time_point at) override;
  void workerHung(int local_rank, int rank, const std::string& reason, const std::string& where,
                  Clock::time_point at) override;
  void restarting(int restarts_used, int max_restarts, Clock::time_point at) override;
  void finished(int exit_code, Clock::time_point at) override;

 private:
  using Json = nlohmann::ordered_json;

  // The metadata of one event: the worker's fields (local_rank < 0: an
  // agent's event) and the job's.
  struct Worker {
    int local_rank = -1;
    int rank = -1;
    pid_t pid = 0;
  };
  Json event(std::string_view state, const Worker& worker, const Json& raw_error,
             const Json& duration_ms, Clock::time_point at) const;
  void write(const Json& event) const;

  Job job_;
  int fd_;
  Clock::time_point started_ = Clock::now();
  WorkerGroup group_;
  int restarts_used_ = 0;
};

}  // namespace ddprun::launcher

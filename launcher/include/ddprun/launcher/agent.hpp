// The per-node agent's supervision: runs the local worker group to the end.
//
// Spawns one worker per local rank with the environment contract, waits for
// exits on pidfds and for the agent's signals on one Asio io_context (the
// calling thread; no polling), and on a worker failure stops the group
// (SIGTERM to every worker's process group, the shutdown timeout, SIGKILL)
// and restarts it with TORCHELASTIC_RESTART_COUNT + 1 until max_restarts is
// spent. A handled signal is forwarded to the workers, then the group is
// stopped the same way. Owns the workers; run() is called once.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ddprun/launcher/subprocess.hpp"
#include "ddprun/proto/env_contract.hpp"

namespace ddprun::launcher {

// Where one worker's output goes. Output always passes through pipes, so
// the console only ever receives whole lines.
struct WorkerOutput {
  std::string stdout_file;  // empty: no file
  std::string stderr_file;
  bool stdout_to_console = true;
  bool stderr_to_console = true;
  std::string stdout_prefix;  // e.g. "[default0]:" for tee'd lines
  std::string stderr_prefix;
  std::string error_file;  // TORCHELASTIC_ERROR_FILE: where torch's @record writes
};

// One attempt's place in an elastic job, decided by the rendezvous.
struct AttemptGroup {
  proto::WorkerEnv group;  // group rank and sizes, the workers' store
  int attempt = 0;         // the round number: TORCHELASTIC_RESTART_COUNT on every node
  int base_rank = 0;       // global rank of local rank 0
};

// Elastic (c10d) membership: when next_round is set, every attempt runs one
// rendezvous round, and a membership change restarts the workers without
// counting against max_restarts.
struct ElasticHooks {
  // Blocks until this node's next round; nullopt: the job ended elsewhere.
  std::function<std::optional<AttemptGroup>()> next_round;
  // Given, once, a function any thread may call with a newer round's number
  // when the running round is over.
  std::function<void(std::function<void(std::int64_t newer_round)> round_over)> on_round_over;
  // This node's workers failed and restarts remain: move every node on.
  std::function<void()> request_restart;
  // Makes a blocked next_round() return nullopt (a signal ends the run). Any thread.
  std::function<void()> cancel_wait;
};

struct AgentConfig {
  int nproc_per_node = 1;
  int max_restarts = 0;
  std::chrono::milliseconds shutdown_timeout{30'000};
  std::vector<int> signals_to_handle;
  // The rendezvous result for this node; rank, local rank and restart count
  // are filled in per worker and attempt.
  proto::WorkerEnv group;
  // The worker's argv for a local rank (e.g. python -u train.py ...).
  std::function<std::vector<std::string>(int local_rank)> command;
  // The agent's own environment, which every worker inherits.
  std::vector<std::pair<std::string, std::string>> base_env;
  // Where each worker's output goes, per attempt; unset: the console only.
  std::function<WorkerOutput(int local_rank, int rank, int attempt)> output;
  // Called before each attempt starts its workers (e.g. to empty the store).
  std::function<void(int attempt)> before_attempt;
  ElasticHooks elastic;  // unset: a fixed group (standalone, static)
  std::string hostname;
};

// One worker's failure, for the report.
struct WorkerFailure {
  int attempt = 0;
  int rank = 0;
  int local_rank = 0;
  pid_t pid = -1;
  ExitStatus status;
  std::string error_file;  // the worker's TORCHELASTIC_ERROR_FILE
  std::chrono::system_clock::time_point time;
  std::chrono::steady_clock::time_point monotonic;  // orders the root cause
};

struct RunResult {
  int exit_code = 0;                    // 0, the root cause's shell code, or 128 + signal
  std::vector<WorkerFailure> failures;  // every attempt's failures, root cause first
  int attempts = 0;
  int signal = 0;                 // the handled signal that stopped the run, if any
  bool closed_elsewhere = false;  // elastic: the job ended on another node first
};

class Agent {
 public:
  explicit Agent(AgentConfig config);
  ~Agent();
  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;

  RunResult run();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// torchrun's failure table: time, host, rank, local rank, exit code or
// signal name, pid, error file and the message/traceback torch's @record
// wrote there, for the root cause and then the other failures.
std::string formatFailureReport(const RunResult& result, const std::string& hostname,
                                const std::string& program);

}  // namespace ddprun::launcher

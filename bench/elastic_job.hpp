// One elastic job on loopback as rdzv_bench runs it: N agents of one launcher
// (ddprun against an external ddprund, ddprun against an etcd cluster
// rdzv_bench started once, or torchrun with agent 0 hosting the c10d store
// on the endpoint), each a launcher::Subprocess, and the
// stamps their workers leave (restart_worker's `rdzv` mode). Every wait has
// the job's deadline; a job that goes wrong throws JobFailure after copying
// its directory somewhere that outlives the benchmark, so the log it names
// can still be read. Owns the agents and the daemon; used by rdzv_bench's
// main thread.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "child_runs.hpp"

namespace ddprun::bench {

// Ddprun: ddprun's c10d backend against a ddprund; DdprunEtcd: its etcd-v3
// backend against the bench's etcd cluster.
enum class Launcher { Ddprun, DdprunEtcd, Torchrun };

const char* nameOf(Launcher launcher);

// The etcd agents' keep-alive: renewed every second, lost after two missed
// renewals, so each agent's etcd lease has a TTL of 2 s (the product, in
// whole seconds). A SIGKILLed agent is noticed only when its lease expires.
constexpr int kEtcdKeepAliveIntervalS = 1;
constexpr int kEtcdKeepAliveMaxAttempt = 2;
constexpr int kEtcdLeaseTtlS = kEtcdKeepAliveIntervalS * kEtcdKeepAliveMaxAttempt;

// What the agents run, found once by rdzv_bench.
struct ElasticPrograms {
  std::string ddprun;
  std::string ddprund;
  std::string python;          // runs torchrun; empty: torchrun is not measured
  std::string worker;          // restart_worker
  std::string etcd_endpoints;  // the etcd cluster's members; empty: ddprun-etcd is not measured
  EnvVars base_env;
};

struct ElasticJobSpec {
  Launcher launcher = Launcher::Ddprun;
  int min_nodes = 2;
  int max_nodes = 2;          // also how many agents may be started
  int hold_s = 0;             // > 0: the first workers hold this long (until killed, in practice)
  std::filesystem::path dir;  // fresh and empty: logs and stamps
  std::string name;           // the run, as an error names it
};

// A run that went wrong. what() is one line: the run, what happened, the log.
class JobFailure : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// One worker's stamp (see restart_worker.cpp).
struct WorkerStamp {
  std::int64_t entered_ns = 0;  // CLOCK_MONOTONIC, as steady_clock reads it
  int restart_count = 0;
  int world_size = 0;
};

class ElasticJob {
 public:
  using Clock = bench::Clock;

  // Starts ddprund first for ddprun (and waits for its port); for torchrun,
  // picks a free port for agent 0 to host on; for ddprun-etcd, nothing.
  ElasticJob(const ElasticPrograms& programs, ElasticJobSpec spec, Clock::time_point deadline);
  // Stops every agent still running, then the daemon.
  ~ElasticJob();
  ElasticJob(const ElasticJob&) = delete;
  ElasticJob& operator=(const ElasticJob&) = delete;

  // Forks the next agent; returns the moment taken just before its fork.
  Clock::time_point startAgent();
  // Waits until agents [0, count) have logged that they entered the
  // rendezvous, so that the next one started is the last to join.
  void waitJoined(int count);
  // Waits until ranks [0, world) have stamped `phase` (0: before a kill, 1:
  // after). Fails if an agent not killed exits first or the deadline passes.
  std::vector<WorkerStamp> waitStamps(int phase, int world);
  // The same, but gives up quietly at `until`: empty.
  std::optional<std::vector<WorkerStamp>> waitStampsUntil(int phase, int world,
                                                          Clock::time_point until);
  // Marks the workers started from now on as replacements, then SIGKILLs
  // agent `index` with its workers (its process group): a lost node.
  // Returns the moment just before the kill.
  Clock::time_point killAgent(int index);
  // Waits until every agent not killed has exited; fails unless all succeeded.
  void waitSuccess();
  // SIGTERM to every agent, SIGKILL to the groups of those still up after a
  // grace period; then the daemon.
  void stopAll();

  [[noreturn]] void fail(const std::string& what, const std::filesystem::path& log);
  std::filesystem::path agentLog(int index) const;

 private:
  std::vector<std::string> agentArgv(int index) const;
  std::optional<std::vector<WorkerStamp>> readStamps(int phase, int world) const;
  // The first agent (not killed) that has exited, if any; reaps it.
  std::optional<int> exitedAgent();

  ElasticPrograms programs_;
  ElasticJobSpec spec_;
  Clock::time_point deadline_;
  std::uint16_t port_ = 0;
  std::optional<launcher::Subprocess> daemon_;
  std::vector<launcher::Subprocess> agents_;
  std::vector<bool> joined_;
  int killed_ = -1;
};

}  // namespace ddprun::bench

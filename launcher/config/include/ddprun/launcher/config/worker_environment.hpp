// The environment of every worker an agent starts, assembled in one place
// and in one order: the agent's own environment; then torchrun's defaults
// where the user set nothing (OMP_NUM_THREADS=1 with several workers per
// node; TORCH_NCCL_ASYNC_ERROR_HANDLING=1 (PyTorch 2.2 and later) or
// NCCL_ASYNC_ERROR_HANDLING=1 (1.13 to 2.1), whichever the workers' torch
// reads, both when its version is unknown, unless the user set either; the hang
// forensics: PYTHONFAULTHANDLER=1, the NCCL Flight Recorder armed with its
// dumps in each worker's attempt directory, each unless the user set it); then
// TORCHELASTIC_SIGNALS_TO_HANDLE from --signals-to-handle, as torchrun
// exports it, and TORCHELASTIC_TIMER_FILE when the agent serves torch's file
// timer; GLOO_SOCKET_IFNAME and NCCL_SOCKET_IFNAME, each where the user set
// none, when a job across hosts needs them (socket_interface.hpp); last,
// the worker's contract (RANK, WORLD_SIZE, MASTER_ADDR, ...;
// proto/env_contract.hpp), DDPRUN_TIMELINE_EVENTS, the worker's own events
// file for the timeline, and DDPRUN_PROGRESS_EVENTS, where it reports its
// steps, which no inherited value can override. With
// --virtual-local-rank every worker's LOCAL_RANK is 0 and its
// CUDA_VISIBLE_DEVICES is its own device. A value, built once by main before
// anything is started; read by the agent's thread.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ddprun/launcher/config/python_interpreter.hpp"
#include "ddprun/launcher/core/launch_config.hpp"
#include "ddprun/proto/env_contract.hpp"

namespace ddprun::launcher {

struct WorkerGroup;

class WorkerEnvironment {
 public:
  using Variables = std::vector<std::pair<std::string, std::string>>;

  // What every worker of the job shares besides its group.
  struct Job {
    int nproc_per_node = 1;
    int max_restarts = 0;
    std::string role = "default";
    std::string run_id = "none";
    std::string signals_to_handle = "SIGTERM,SIGINT,SIGHUP,SIGQUIT";
    std::string timer_file;  // the file timer's named pipe; empty: not served
    bool virtual_local_rank = false;
    // The interface for the workers' Gloo and NCCL sockets; empty: none.
    std::string socket_interface;
    // Where the workers' own timeline events files go
    // (timelineEventsFile()); empty: none, DDPRUN_TIMELINE_EVENTS unset.
    std::filesystem::path timeline_events_dir;
    // Where the workers' progress files go (progressEventsFile()); empty:
    // none, DDPRUN_PROGRESS_EVENTS unset.
    std::filesystem::path progress_events_dir;
    // The Python workers' torch, when known (python_interpreter.hpp): which
    // NCCL error-handling name it reads.
    std::optional<TorchVersion> workers_torch;
  };

  // `inherited`: the agent's own environment, NAME and value (a later entry
  // for a name wins, as in a shell). Throws ConfigError when
  // --virtual-local-rank leaves a worker without a device of its own.
  WorkerEnvironment(Job job, Variables inherited);
  // The job's values from `config`; across hosts, the socket interface is
  // looked up here (the host name and the endpoint are resolved).
  static WorkerEnvironment forLaunch(const LaunchConfig& config, int nproc, Variables inherited,
                                     std::optional<TorchVersion> workers_torch = std::nullopt);

  // The contract of local rank `local_rank` of `group`.
  proto::WorkerEnv contract(const WorkerGroup& group, int local_rank,
                            const std::string& error_file) const;
  // That worker's whole environment, sorted by name.
  Variables forWorker(const WorkerGroup& group, int local_rank,
                      const std::string& error_file) const;

  // Gives every worker from now on a timeline events file in `dir`.
  void reportTimelineEventsTo(std::filesystem::path dir) {
    job_.timeline_events_dir = std::move(dir);
  }

  // Gives every worker from now on a progress file in `dir`.
  void reportProgressTo(std::filesystem::path dir) { job_.progress_events_dir = std::move(dir); }

  // What to warn the user of once (torchrun's OMP_NUM_THREADS warning; no
  // socket interface found for a job across hosts).
  const std::vector<std::string>& notices() const { return notices_; }
  // What to tell the user once (the socket interface chosen, and why).
  const std::vector<std::string>& infos() const { return infos_; }

 private:
  Job job_;
  Variables base_;                          // inherited, with the defaults and the signals applied
  bool base_has_nccl_dump_prefix_ = false;  // the user chose where NCCL dumps go
  // --virtual-local-rank: each local rank's CUDA_VISIBLE_DEVICES; else empty.
  std::vector<std::string> own_devices_;
  std::vector<std::string> notices_;
  std::vector<std::string> infos_;
};

// The events file of local rank `local_rank` in attempt `attempt`, in `dir`:
// <dir>/attempt_<N>.local_rank_<L>.jsonl, one per worker and attempt, so that
// the agent folds each into the timeline once, when that worker exits.
std::filesystem::path timelineEventsFile(const std::filesystem::path& dir, int attempt,
                                         int local_rank);

// The progress file of local rank `local_rank` in attempt `attempt`, in
// `dir`: <dir>/attempt_<N>.local_rank_<L>.progress.jsonl.
std::filesystem::path progressEventsFile(const std::filesystem::path& dir, int attempt,
                                         int local_rank);

}  // namespace ddprun::launcher

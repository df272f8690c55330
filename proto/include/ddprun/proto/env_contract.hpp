// The worker environment contract: the variables an agent (ddprun, torchrun)
// gives each worker, defined once so the launcher writes and the worker reads
// the same names. Values follow torchrun 2.x (docs/torchrun-contract.md §5).
// Pure functions; no process state is touched except by fromProcessEnvironment().
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ddprun::proto {

namespace env {
inline constexpr std::string_view kRank = "RANK";
inline constexpr std::string_view kLocalRank = "LOCAL_RANK";
inline constexpr std::string_view kGroupRank = "GROUP_RANK";
inline constexpr std::string_view kRoleRank = "ROLE_RANK";
inline constexpr std::string_view kRoleName = "ROLE_NAME";
inline constexpr std::string_view kLocalWorldSize = "LOCAL_WORLD_SIZE";
inline constexpr std::string_view kWorldSize = "WORLD_SIZE";
inline constexpr std::string_view kGroupWorldSize = "GROUP_WORLD_SIZE";
inline constexpr std::string_view kRoleWorldSize = "ROLE_WORLD_SIZE";
inline constexpr std::string_view kMasterAddr = "MASTER_ADDR";
inline constexpr std::string_view kMasterPort = "MASTER_PORT";
inline constexpr std::string_view kRestartCount = "TORCHELASTIC_RESTART_COUNT";
inline constexpr std::string_view kMaxRestarts = "TORCHELASTIC_MAX_RESTARTS";
inline constexpr std::string_view kRunId = "TORCHELASTIC_RUN_ID";
inline constexpr std::string_view kUseAgentStore = "TORCHELASTIC_USE_AGENT_STORE";
inline constexpr std::string_view kErrorFile = "TORCHELASTIC_ERROR_FILE";
// Set in the agent's own environment (and so inherited), not per worker.
inline constexpr std::string_view kOmpNumThreads = "OMP_NUM_THREADS";
// NCCL's async error handling: PyTorch 2.2+ reads the first name, 1.13 to
// 2.1 the second; the agent sets both to 1 unless the user set either.
inline constexpr std::string_view kNcclAsyncErrorHandling = "TORCH_NCCL_ASYNC_ERROR_HANDLING";
inline constexpr std::string_view kLegacyNcclAsyncErrorHandling = "NCCL_ASYNC_ERROR_HANDLING";
// Forensics the agent arms unless the user set them (each on its own):
// Python's faulthandler, so that the SIGABRT a hung group is stopped with
// prints every thread's Python stack; and PyTorch's NCCL Flight Recorder
// (2.3+), which dumps its trace to <dump prefix><rank> on a timeout, the
// prefix being the worker's attempt directory.
inline constexpr std::string_view kPythonFaultHandler = "PYTHONFAULTHANDLER";
inline constexpr std::string_view kNcclTraceBufferSize = "TORCH_NCCL_TRACE_BUFFER_SIZE";
inline constexpr std::string_view kNcclDumpOnTimeout = "TORCH_NCCL_DUMP_ON_TIMEOUT";
inline constexpr std::string_view kNcclDebugInfoTempFile = "TORCH_NCCL_DEBUG_INFO_TEMP_FILE";
// The Flight Recorder dump's name in the attempt directory, before the rank.
inline constexpr std::string_view kNcclTraceDumpPrefix = "nccl_trace_rank_";
// Inherited; narrowed to one device per worker by --virtual-local-rank.
inline constexpr std::string_view kCudaVisibleDevices = "CUDA_VISIBLE_DEVICES";
inline constexpr std::string_view kSignalsToHandle = "TORCHELASTIC_SIGNALS_TO_HANDLE";
inline constexpr std::string_view kPythonExec = "PYTHON_EXEC";
// torch's file timer: "1" in the agent's environment turns it on; the named
// pipe's path, given to the agent or chosen by it, reaches every worker.
inline constexpr std::string_view kEnableFileTimer = "TORCHELASTIC_ENABLE_FILE_TIMER";
inline constexpr std::string_view kTimerFile = "TORCHELASTIC_TIMER_FILE";
// The network interface of Gloo's and NCCL's sockets: inherited; set by the
// agent across hosts where the host name resolves only to loopback.
inline constexpr std::string_view kGlooSocketIfname = "GLOO_SOCKET_IFNAME";
inline constexpr std::string_view kNcclSocketIfname = "NCCL_SOCKET_IFNAME";
// ddprun's own, per worker: the file where the worker may append its own
// events (one JSON object a line) for the agent's timeline.json
// (docs/torchrun-contract.md §9.5).
inline constexpr std::string_view kTimelineEvents = "DDPRUN_TIMELINE_EVENTS";
// ddprun's own, per worker: the file where the worker appends one line per
// step, {"name": "progress", "ts_monotonic_ns": ..., "step": N}, which its
// agent reads while it runs (--progress-timeout, the crash-loop rule).
inline constexpr std::string_view kProgressEvents = "DDPRUN_PROGRESS_EVENTS";
}  // namespace env

// One worker's view of its job. Defaults are what a worker assumes when an
// optional variable is absent (e.g. under a hand-written launch script).
struct WorkerEnv {
  int rank = 0;
  int local_rank = 0;
  int group_rank = 0;
  int role_rank = 0;
  std::string role_name = "default";
  int local_world_size = 1;
  int world_size = 1;
  int group_world_size = 1;
  int role_world_size = 1;
  std::string master_addr;
  std::uint16_t master_port = 0;
  int restart_count = 0;
  int max_restarts = 0;
  std::string run_id = "none";
  bool use_agent_store = false;  // every rank is a client of MASTER_ADDR:MASTER_PORT
  std::string error_file;        // where torch's @record writes error.json; may be empty

  bool operator==(const WorkerEnv&) const = default;
};

using EnvLookup = std::function<std::optional<std::string>(std::string_view name)>;

// The variables to set for a worker, in a stable order.
std::vector<std::pair<std::string, std::string>> toEnvironment(const WorkerEnv& worker);

// Reads a worker's contract. RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR and
// MASTER_PORT are required; the others take WorkerEnv's defaults when absent
// (LOCAL_WORLD_SIZE and ROLE_WORLD_SIZE default to WORLD_SIZE). Throws
// ConfigError naming the first variable that is missing, malformed or
// inconsistent with the others (e.g. RANK not below WORLD_SIZE).
WorkerEnv fromEnvironment(const EnvLookup& lookup);

// fromEnvironment() over this process's environment.
WorkerEnv fromProcessEnvironment();

}  // namespace ddprun::proto

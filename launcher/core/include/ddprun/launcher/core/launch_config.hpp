// LaunchConfig: everything torchrun 2.14's command line (plus its PET_*
// fallbacks) says about one launch, parsed and typed, with the pure-config
// derived rules of docs/torchrun-contract.md §3 already applied (see cli.hpp),
// ddprun's Slurm rules (§3.12) included, and where each value came from. A plain value:
// built once on the main thread by parseCommandLine, then read-only.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "ddprun/launcher/core/progress_timeout.hpp"
#include "ddprun/launcher/core/rdzv_conf.hpp"

namespace ddprun::launcher {

// --nproc-per-node: a count, or a device kind resolved later by the agent
// (device counts are not pure configuration). kGpusElseDefault is no flag's
// value: under Slurm without SLURM_GPUS_ON_NODE, the visible GPUs, else
// torchrun's default of 1 (docs/torchrun-contract.md §3.12).
struct NprocPerNode {
  enum class Kind { kCount, kCpu, kGpu, kAuto, kGpusElseDefault };
  Kind kind = Kind::kCount;
  int count = 1;  // meaningful for kCount only
  bool operator==(const NprocPerNode&) const = default;
};

// torchrun's Std: which of a worker's streams go to files (-r) or are tee'd (-t).
enum class Std { kNone = 0, kOut = 1, kErr = 2, kAll = 3 };

// -r/-t value: one Std for every local rank, or a map for listed local ranks
// (unlisted ranks get kNone, as torchrun's to_map does).
struct StdSpec {
  std::variant<Std, std::map<int, Std>> value = Std::kNone;
  Std forLocalRank(int local_rank) const;
  bool operator==(const StdSpec&) const = default;
};

// host and port of a rendezvous endpoint, parsed as docs/torchrun-contract.md §3.6 says
// (IPv6 without brackets).
struct Endpoint {
  std::string host;
  int port = 0;
  bool operator==(const Endpoint&) const = default;
};

enum class StartMethod { kSpawn, kFork, kForkserver };

// Where a launch value came from, by option dest ("nnodes", "rdzv_endpoint"):
// "flag", "env:PET_NNODES", "slurm:SLURM_STEP_NUM_NODES", or "derived" (from
// other values, e.g. --standalone's endpoint). A dest not listed has its
// default. --dry-run reports it; the Slurm rules read it to let every value
// the user gave win.
using ValueSources = std::map<std::string, std::string, std::less<>>;

// The Slurm job step a launch was derived from (docs/torchrun-contract.md §3.12).
struct SlurmStepInfo {
  std::string job_id;     // SLURM_JOB_ID
  std::string step_id;    // SLURM_STEP_ID; empty when srun set none
  std::string node_list;  // SLURM_STEP_NODELIST, as given
  bool operator==(const SlurmStepInfo&) const = default;
};
enum class NumaBinding { kNode, kSocket, kExclusive, kCoreComplex };

struct LaunchConfig {
  // --nnodes N or MIN:MAX; 0 < min <= max. Default 1:1.
  int min_nodes = 1;
  int max_nodes = 1;
  // --nproc-per-node: int or cpu|gpu|auto (xpu is refused). Default 1.
  NprocPerNode nproc_per_node;
  // --rdzv-backend as given (static, c10d, etcd, etcd-v2, or a plug-in name);
  // after --standalone / auto-port it is "c10d".
  std::string rdzv_backend = "static";
  // --rdzv-endpoint as given; for static with an empty endpoint it is built
  // from master_addr:master_port(29500), as torchrun's get_rdzv_endpoint does.
  std::string rdzv_endpoint;
  // rdzv_endpoint parsed with the backend's default port (c10d 29400, etcd
  // 2379; static has none and needs a port). nullopt for plug-in backends.
  std::optional<Endpoint> rdzv_address;
  // --rdzv-id; torchrun's default is the literal string "none".
  std::string rdzv_id = "none";
  // --rdzv-conf k=v,..., typed and checked (static's "rank" is node_rank).
  RdzvConf rdzv_conf;
  // --standalone as given (its effects are already applied above).
  bool standalone = false;
  // true when the single-node auto-port rule (docs/torchrun-contract.md §3.4)
  // switched to standalone.
  bool auto_standalone = false;
  // --max-restarts, >= 0. Default 0.
  int max_restarts = 0;
  // --monitor-interval in seconds, > 0. Default 0.1.
  double monitor_interval_s = 0.1;
  // --start-method; only matters for --run-path in torchrun.
  StartMethod start_method = StartMethod::kSpawn;
  // --role, the ROLE_NAME of the workers. Default "default".
  std::string role = "default";
  // -m/--module: run the script as `python -m`.
  bool module = false;
  // --no-python: exec the script itself.
  bool no_python = false;
  // --run-path: run the script through runpy.run_path (wins over --no-python).
  bool run_path = false;
  // --log-dir; nullopt means "create a torchelastic_* temp dir".
  std::optional<std::string> log_dir;
  // -r/--redirects and -t/--tee. Default 0 (none).
  StdSpec redirects;
  StdSpec tee;
  // Tee prefix template: --log-line-prefix-template, else PET_..., else
  // TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE; nullopt = "[${role_name}${local_rank}]:".
  std::optional<std::string> log_line_prefix_template;
  // --local-ranks-filter; nullopt = every local rank reaches the console.
  std::optional<std::set<int>> local_ranks_filter;
  // --ranks-filter: the same by global rank (the rank of the current round);
  // a worker reaches the console when both filters let it.
  std::optional<std::set<int>> ranks_filter;
  // --duplicate-stdout-filters / --duplicate-stderr-filters substrings (",," is a comma).
  std::vector<std::string> duplicate_stdout_filters;
  std::vector<std::string> duplicate_stderr_filters;
  // --node-rank, >= 0; used by the static backend only. Default 0.
  int node_rank = 0;
  // --master-addr, static backend only. Default 127.0.0.1; IPv6 as [::1].
  std::string master_addr = "127.0.0.1";
  // --master-port; nullopt = not given (static then uses 29500).
  std::optional<int> master_port;
  // --local-addr; nullopt = the agent uses the host's FQDN.
  std::optional<std::string> local_addr;
  // --logs-specs plug-in name (not env-backed); nullopt = the default layout.
  std::optional<std::string> logs_specs;
  // --numa-binding (not env-backed); nullopt = no binding.
  std::optional<NumaBinding> numa_binding;
  // --signals-to-handle as signal numbers, in the given order, and the text
  // as given (exported as TORCHELASTIC_SIGNALS_TO_HANDLE).
  std::vector<int> signals_to_handle;
  std::string signals_to_handle_text = "SIGTERM,SIGINT,SIGHUP,SIGQUIT";
  // LOGLEVEL (torchrun's verbosity of its agent), as spdlog names the level
  // ("debug", "info", "warning", "error", "critical"); nullopt: unset, and
  // ddprun logs at info.
  std::optional<std::string> log_level;
  // --shutdown-timeout as given (>= 0); nullopt when absent.
  std::optional<int> shutdown_timeout_s;
  // Effective grace before SIGKILL: the flag, else TORCH_ELASTIC_SHUTDOWN_TIMEOUT, else 30.
  int shutdown_grace_s = 30;
  // TORCHELASTIC_UNINTERRUPTIBLE_STATE_TIMEOUT in seconds (torch's D-state
  // check, docs/torchrun-contract.md §7.1); nullopt or 0 = off, torch's default.
  std::optional<double> uninterruptible_state_timeout_s;
  // torch's file timer (docs/torchrun-contract.md §7.6): on when
  // TORCHELASTIC_ENABLE_FILE_TIMER=1, served at TORCHELASTIC_TIMER_FILE, else
  // at a fresh <TMPDIR>/watchdog_timer_<uuid>; nullopt = off.
  std::optional<std::string> timer_file;
  // --worker-hang-timeout in seconds (a ddprun extra); nullopt = off.
  std::optional<double> worker_hang_timeout_s;
  // --progress-timeout (a ddprun extra); nullopt = off.
  std::optional<ProgressTimeout> progress_timeout;
  // --max-unproductive-restarts (a ddprun extra); 0 = never.
  int max_unproductive_restarts = 3;
  // --health-check CMD and its --health-check-timeout in seconds (ddprun
  // extras); nullopt = none, 60 s.
  std::optional<std::string> health_check;
  std::optional<double> health_check_timeout_s;
  // --metrics-port (a ddprun extra, no PET_ fallback): serve the agent's
  // Prometheus metrics there; 0 = a free port; nullopt = no metrics.
  std::optional<int> metrics_port;
  // --metrics-host: the address they listen on; nullopt = every address.
  std::optional<std::string> metrics_host;
  // --virtual-local-rank: LOCAL_RANK=0 and one GPU per worker.
  bool virtual_local_rank = false;
  // --event-log-handler: null, console or dynamic_rendezvous. Default null.
  std::string event_log_handler = "null";
  // The multi-host launch (docs/multihost.md): --hostfile, its host and slot
  // selection (--include, --exclude: DeepSpeed's syntax, unparsed here) and
  // how a host is reached (--ssh-command, split on blanks).
  std::optional<std::string> hostfile;
  std::string include_hosts;
  std::string exclude_hosts;
  // The default never asks for a password, and finds a dead session within
  // 15 s (3 unanswered keep-alives 5 s apart).
  std::vector<std::string> ssh_command = {
      "ssh", "-o", "BatchMode=yes", "-o", "ServerAliveInterval=5", "-o", "ServerAliveCountMax=3"};
  // --stdin-hangup: stdin's end stops the job as SIGHUP does.
  bool stdin_hangup = false;
  // ddprun's own options as given before the script, each canonical with its
  // value detached ("--max-restarts" "3"): what --hostfile passes on to the
  // agents it starts, less what it sets itself.
  std::vector<std::string> option_args;
  // Positional script (path, module with -m, executable with --no-python) and
  // everything after it, verbatim.
  std::string training_script;
  std::vector<std::string> training_script_args;
  // -h/--help was given: the caller prints helpText() and exits 0; nothing
  // else in this struct is meaningful then.
  bool show_help = false;
  // --print-completion SHELL ("bash" or "zsh"): the caller prints
  // completionScript(SHELL) and exits 0; nothing else is meaningful then.
  std::optional<std::string> print_completion;
  // --version: the caller prints "ddprun <version>" and exits 0; nothing
  // else is meaningful then.
  bool show_version = false;
  // --dry-run: the caller prints the launch plan as JSON and exits 0, starting nothing.
  bool dry_run = false;
  // --no-slurm: never derive the launch from a Slurm step's environment.
  bool no_slurm = false;
  // The Slurm step the launch was derived from; nullopt when none was.
  std::optional<SlurmStepInfo> slurm;
  // Where each value came from (see ValueSources).
  ValueSources sources;
  // Warnings torchrun would log (docs/torchrun-contract.md §3.8), and
  // ddprun's own (a Slurm job not run through srun), for the caller to print.
  std::vector<std::string> warnings;
};

}  // namespace ddprun::launcher

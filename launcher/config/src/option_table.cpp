#include "ddprun/launcher/config/option_table.hpp"

#include <algorithm>
#include <cctype>
#include <sstream>
#include <string_view>

namespace ddprun::launcher {
namespace {

using G = OptionGroup;
using H = ValueHint;

// torchrun 2.14.1's options (run.py:483-851), in its order; then ddprun's own.
constexpr OptionSpec kOptions[] = {
    {"--nnodes", "nnodes", false, true, "NNODES", "Nodes: N or MIN:MAX (default 1:1)", G::kSize},
    {"--nproc-per-node,--nproc_per_node", "nproc_per_node", false, true, "NPROC",
     "Workers per node: int, cpu, gpu or auto (default 1)", G::kSize, H::kChoices, "auto cpu gpu"},
    {"--rdzv-backend,--rdzv_backend", "rdzv_backend", false, true, "BACKEND",
     "Rendezvous backend (default static)", G::kRendezvous, H::kChoices,
     "static c10d etcd-v3 etcd etcd-v2"},
    {"--rdzv-endpoint,--rdzv_endpoint", "rdzv_endpoint", false, true, "HOST[:PORT]",
     "Rendezvous endpoint; IPv6 as [addr]:port; etcd: host:port,host:port,...", G::kRendezvous},
    {"--rdzv-id,--rdzv_id", "rdzv_id", false, true, "ID", "Job id shared by all nodes",
     G::kRendezvous},
    {"--rdzv-conf,--rdzv_conf", "rdzv_conf", false, true, "K=V,...", "Rendezvous settings",
     G::kRendezvous},
    {"--standalone", "standalone", true, true, "",
     "Single node: c10d rendezvous on a free local port", G::kRendezvous},
    {"--max-restarts,--max_restarts", "max_restarts", false, true, "N",
     "Worker-group restarts before failing (default 0)", G::kLaunch},
    {"--monitor-interval,--monitor_interval", "monitor_interval", false, true, "SECONDS",
     "Worker poll period (default 0.1)", G::kLaunch},
    {"--start-method,--start_method", "start_method", false, true, "METHOD",
     "spawn, fork or forkserver (--run-path only)", G::kLaunch, H::kChoices,
     "spawn fork forkserver"},
    {"--event-log-handler,--event_log_handler", "event_log_handler", false, true, "HANDLER",
     "null, console or dynamic_rendezvous (default null)", G::kLaunch, H::kChoices,
     "null console dynamic_rendezvous"},
    {"--role", "role", false, true, "ROLE", "Worker role name (default 'default')", G::kLaunch},
    {"-m,--module", "module", true, true, "", "Run the script as `python -m`", G::kLaunch},
    {"--no-python,--no_python", "no_python", true, true, "", "Exec the script directly",
     G::kLaunch},
    {"--run-path,--run_path", "run_path", true, true, "", "Run the script with runpy.run_path",
     G::kLaunch},
    {"--log-dir,--log_dir", "log_dir", false, true, "DIR", "Base directory for logs", G::kLaunch,
     H::kDirectory},
    {"-r,--redirects", "redirects", false, true, "STD", "0-3 or LOCAL_RANK:0-3,... to files",
     G::kLaunch, H::kChoices, "0 1 2 3"},
    {"-t,--tee", "tee", false, true, "STD", "0-3 or LOCAL_RANK:0-3,... to files and console",
     G::kLaunch, H::kChoices, "0 1 2 3"},
    {"--log-line-prefix-template,--log_line_prefix_template", "log_line_prefix_template", false,
     true, "TEMPLATE", "Tee prefix with ${role_name} ${local_rank} ${rank} ${hostname}",
     G::kLaunch},
    {"--local-ranks-filter,--local_ranks_filter", "local_ranks_filter", false, true, "RANKS",
     "Local ranks whose output reaches the console", G::kLaunch},
    {"--ranks-filter,--ranks_filter", "ranks_filter", false, true, "RANKS",
     "Global ranks whose output reaches the console", G::kLaunch},
    {"--duplicate-stdout-filters,--duplicate_stdout_filters", "duplicate_stdout_filters", false,
     true, "SUBSTRINGS", "Copy matching stdout lines to filtered_stdout.log", G::kLaunch},
    {"--duplicate-stderr-filters,--duplicate_stderr_filters", "duplicate_stderr_filters", false,
     true, "SUBSTRINGS", "Copy matching stderr lines to filtered_stderr.log", G::kLaunch},
    {"--node-rank,--node_rank", "node_rank", false, true, "RANK", "Node rank (static only)",
     G::kCompatible},
    {"--master-addr,--master_addr", "master_addr", false, true, "ADDR",
     "Static rendezvous host (default 127.0.0.1)", G::kCompatible},
    {"--master-port,--master_port", "master_port", false, true, "PORT",
     "Static rendezvous port (default 29500)", G::kCompatible},
    {"--local-addr,--local_addr", "local_addr", false, true, "ADDR", "Address this node advertises",
     G::kCompatible},
    {"--logs-specs,--logs_specs", "logs_specs", false, false, "NAME",
     "Log layout plug-in (a Python class: refused)", G::kCompatible},
    {"--numa-binding,--numa_binding", "numa_binding", false, false, "MODE",
     "node, socket, exclusive or core-complex", G::kCompatible, H::kChoices,
     "node socket exclusive core-complex"},
    {"--signals-to-handle,--signals_to_handle", "signals_to_handle", false, true, "SIGNALS",
     "Signals forwarded to workers (default SIGTERM,SIGINT,SIGHUP,SIGQUIT)", G::kCompatible},
    {"--shutdown-timeout,--shutdown_timeout", "shutdown_timeout", false, true, "SECONDS",
     "Grace before SIGKILL on shutdown (default 30)", G::kCompatible},
    {"--virtual-local-rank,--virtual_local_rank", "virtual_local_rank", true, true, "",
     "LOCAL_RANK=0 and one visible GPU per worker", G::kCompatible},
    {"--print-completion,--print_completion", "print_completion", false, false, "SHELL",
     "Print a bash, tcsh or zsh completion script and exit", G::kCompatible, H::kChoices,
     "bash tcsh zsh"},
    // ddprun's own, after torchrun's. Whole name only where a prefix of it
    // is one of torchrun's abbreviations (--max for --max-restarts, --he for
    // --help).
    {"--worker-hang-timeout,--worker_hang_timeout", "worker_hang_timeout", false, true, "SECONDS",
     "Kill a worker that printed nothing and used no CPU for this long, as a crash", G::kDdprun},
    {"--progress-timeout,--progress_timeout", "progress_timeout", false, true, "SECONDS|auto",
     "Kill a worker that reported progress, then none for this long (auto[:FLOOR]: learned)",
     G::kDdprun},
    {"--max-unproductive-restarts,--max_unproductive_restarts", "max_unproductive_restarts", false,
     true, "N",
     "End the job (exit 120) after N failed attempts in a row that made no progress (default 3; "
     "0: never)",
     G::kDdprun, H::kText, "", true},
    {"--health-check,--health_check", "health_check", false, true, "CMD",
     "Run CMD (sh -c) before every join; failing it keeps this node out (exit 121)", G::kDdprun,
     H::kText, "", true},
    {"--health-check-timeout,--health_check_timeout", "health_check_timeout", false, true,
     "SECONDS", "How long --health-check may take (default 60)", G::kDdprun, H::kText, "", true},
    {"--no-slurm,--no_slurm", "no_slurm", true, true, "",
     "Under srun, take nothing from Slurm's variables (no derived rendezvous)", G::kDdprun},
    {"--dry-run,--dry_run", "dry_run", true, false, "",
     "Print the launch plan as one JSON object and exit, starting nothing", G::kDdprun},
    {"--metrics-port,--metrics_port", "metrics_port", false, false, "PORT",
     "Serve this agent's Prometheus metrics (/metrics, /healthz) on PORT; 0: a free one",
     G::kDdprun},
    {"--metrics-host,--metrics_host", "metrics_host", false, false, "ADDR",
     "Address the metrics listen on (default: every address)", G::kDdprun},
    // The multi-host launch (docs/multihost.md): whole names only, so that
    // no abbreviation of torchrun's options changes meaning.
    {"--hostfile", "hostfile", false, false, "FILE",
     "Start one agent per host of FILE ('HOST slots=N' lines) over ssh, this process hosting "
     "the c10d rendezvous",
     G::kDdprun, H::kText, "", true},
    {"--include", "include", false, false, "SPEC",
     "Only these hosts and slots of --hostfile: HOST[:SLOT,...][@HOST...]", G::kDdprun, H::kText,
     "", true},
    {"--exclude", "exclude", false, false, "SPEC",
     "All of --hostfile but these hosts and slots: HOST[:SLOT,...][@HOST...]", G::kDdprun, H::kText,
     "", true},
    {"--ssh-command,--ssh_command", "ssh_command", false, false, "CMD",
     "How --hostfile reaches a host: CMD HOST COMMAND (default: ssh -o BatchMode=yes and "
     "keep-alives)",
     G::kDdprun, H::kText, "", true},
    {"--stdin-hangup,--stdin_hangup", "stdin_hangup", true, false, "",
     "Stop the job as on SIGHUP once stdin reaches its end (--hostfile's remote agents)",
     G::kDdprun, H::kText, "", true},
    // Whole name only: torchrun has no --version, and `--v` is its
    // --virtual-local-rank.
    {"--version", "version", true, false, "", "Print ddprun's version and exit (never abbreviated)",
     G::kDdprun, H::kText, "", true},
};

// torchrun's default is "", or it reads "" as not given (`if args.x:`);
// --role's "" is taken as it is, as torchrun takes it.
constexpr std::string_view kEmptyIsAValue[] = {
    "rdzv_endpoint",
    "rdzv_conf",
    "role",
    "log_dir",
    "log_line_prefix_template",
    "local_ranks_filter",
    "ranks_filter",
    "duplicate_stdout_filters",
    "duplicate_stderr_filters",
    "local_addr",
};

std::vector<std::string> splitOn(const std::string& text, char separator) {
  std::vector<std::string> parts;
  std::istringstream in(text);
  for (std::string part; std::getline(in, part, separator);) {
    if (!part.empty()) {
      parts.push_back(part);
    }
  }
  return parts;
}

}  // namespace

std::span<const OptionSpec> optionTable() { return kOptions; }

const char* groupTitle(OptionGroup group) {
  switch (group) {
    case OptionGroup::kSize:
      return "worker and node size";
    case OptionGroup::kRendezvous:
      return "rendezvous";
    case OptionGroup::kLaunch:
      return "user-code launch";
    case OptionGroup::kCompatible:
      // torchrun's last section: torch.distributed.launch's flags, and the
      // ones added after them.
      return "torch.distributed.launch compatibility, and later additions";
    case OptionGroup::kDdprun:
      break;
  }
  return "ddprun's own options";
}

std::string canonicalFlag(const OptionSpec& spec) {
  const std::string names = spec.names;
  const auto start = names.find("--");
  return names.substr(start, names.find(',', start) - start);
}

std::string petName(const OptionSpec& spec) {
  std::string name = "PET_";
  for (const char c : std::string(spec.dest)) {
    name += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  }
  return name;
}

std::vector<std::string> spellings(const OptionSpec& spec) { return splitOn(spec.names, ','); }

namespace {

// Whether `test` holds for one of the option's spellings, read in place.
template <typename Test>
bool anySpelling(const OptionSpec& spec, Test test) {
  std::string_view rest = spec.names;
  for (auto comma = rest.find(','); comma != std::string_view::npos; comma = rest.find(',')) {
    if (test(rest.substr(0, comma))) {
      return true;
    }
    rest.remove_prefix(comma + 1);
  }
  return test(rest);
}

}  // namespace

bool isSpelling(const OptionSpec& spec, std::string_view name) {
  return anySpelling(spec, [name](std::string_view spelling) { return spelling == name; });
}

bool hasShortName(const OptionSpec& spec) {
  return anySpelling(spec, [](std::string_view spelling) { return !spelling.starts_with("--"); });
}

bool takesEmptyValue(const OptionSpec& spec) {
  return std::find(std::begin(kEmptyIsAValue), std::end(kEmptyIsAValue), spec.dest) !=
         std::end(kEmptyIsAValue);
}

std::vector<std::string> choiceList(const OptionSpec& spec) { return splitOn(spec.choices, ' '); }

}  // namespace ddprun::launcher

// Every torchrun option in both spellings, its default, its PET_ fallback and
// the precedence of the command line over the environment.
#include <gtest/gtest.h>

#include <csignal>
#include <functional>

#include "ddprun/launcher/config/cli.hpp"
#include "ddprun/launcher/config/option_table.hpp"
#include "launcher_test_util.hpp"

namespace ddprun::launcher {
namespace {

using testing::EnvMap;
using testing::parse;
using testing::parseError;

// One value option: its two spellings, its PET_ name, a non-default value
// and how to read the parsed field back as text.
struct ValueCase {
  std::string dashed;
  std::string underscored;  // empty when the option has one spelling
  std::string pet;          // empty when not env-backed
  std::string value;
  std::function<std::string(const LaunchConfig&)> read;
  std::string expected;
};

std::string join(const std::set<int>& values) {
  std::string out;
  for (const int v : values) {
    out += (out.empty() ? "" : ",") + std::to_string(v);
  }
  return out;
}

// --nnodes 2 keeps the static backend (no auto-port), so static-only fields are visible.
std::vector<ValueCase> valueCases() {
  return {
      {"--nnodes", "", "PET_NNODES", "2:4",
       [](auto& c) { return std::to_string(c.min_nodes) + ":" + std::to_string(c.max_nodes); },
       "2:4"},
      {"--nproc-per-node", "--nproc_per_node", "PET_NPROC_PER_NODE", "8",
       [](auto& c) { return std::to_string(c.nproc_per_node.count); }, "8"},
      {"--rdzv-backend", "--rdzv_backend", "PET_RDZV_BACKEND", "c10d",
       [](auto& c) { return c.rdzv_backend; }, "c10d"},
      {"--rdzv-endpoint", "--rdzv_endpoint", "PET_RDZV_ENDPOINT", "node0:1234",
       [](auto& c) { return c.rdzv_endpoint; }, "node0:1234"},
      {"--rdzv-id", "--rdzv_id", "PET_RDZV_ID", "job7", [](auto& c) { return c.rdzv_id; }, "job7"},
      {"--rdzv-conf", "--rdzv_conf", "PET_RDZV_CONF", "join_timeout=5",
       [](auto& c) { return std::to_string(c.rdzv_conf.joinTimeout().count()); }, "5000"},
      {"--max-restarts", "--max_restarts", "PET_MAX_RESTARTS", "3",
       [](auto& c) { return std::to_string(c.max_restarts); }, "3"},
      {"--monitor-interval", "--monitor_interval", "PET_MONITOR_INTERVAL", "2.5",
       [](auto& c) { return std::to_string(c.monitor_interval_s); }, "2.500000"},
      {"--start-method", "--start_method", "PET_START_METHOD", "fork",
       [](auto& c) { return std::to_string(static_cast<int>(c.start_method)); }, "1"},
      {"--event-log-handler", "--event_log_handler", "PET_EVENT_LOG_HANDLER", "console",
       [](auto& c) { return c.event_log_handler; }, "console"},
      {"--role", "", "PET_ROLE", "trainer", [](auto& c) { return c.role; }, "trainer"},
      {"--log-dir", "--log_dir", "PET_LOG_DIR", "/tmp/logs",
       [](auto& c) { return c.log_dir.value_or("<none>"); }, "/tmp/logs"},
      {"--redirects", "-r", "PET_REDIRECTS", "3",
       [](auto& c) { return std::to_string(static_cast<int>(c.redirects.forLocalRank(5))); }, "3"},
      {"--tee", "-t", "PET_TEE", "0:2",
       [](auto& c) { return std::to_string(static_cast<int>(c.tee.forLocalRank(0))); }, "2"},
      {"--log-line-prefix-template", "--log_line_prefix_template", "PET_LOG_LINE_PREFIX_TEMPLATE",
       "<${rank}>", [](auto& c) { return c.log_line_prefix_template.value_or("<none>"); },
       "<${rank}>"},
      {"--local-ranks-filter", "--local_ranks_filter", "PET_LOCAL_RANKS_FILTER", "2,0",
       [](auto& c) { return join(c.local_ranks_filter.value_or(std::set<int>{})); }, "0,2"},
      {"--ranks-filter", "--ranks_filter", "PET_RANKS_FILTER", "9,0",
       [](auto& c) { return join(c.ranks_filter.value_or(std::set<int>{})); }, "0,9"},
      {"--duplicate-stdout-filters", "--duplicate_stdout_filters", "PET_DUPLICATE_STDOUT_FILTERS",
       "loss,,x", [](auto& c) { return c.duplicate_stdout_filters.at(0); }, "loss,x"},
      {"--duplicate-stderr-filters", "--duplicate_stderr_filters", "PET_DUPLICATE_STDERR_FILTERS",
       "a,b", [](auto& c) { return c.duplicate_stderr_filters.at(1); }, "b"},
      {"--node-rank", "--node_rank", "PET_NODE_RANK", "1",
       [](auto& c) { return std::to_string(c.node_rank); }, "1"},
      {"--master-addr", "--master_addr", "PET_MASTER_ADDR", "10.0.0.1",
       [](auto& c) { return c.master_addr; }, "10.0.0.1"},
      {"--master-port", "--master_port", "PET_MASTER_PORT", "1234",
       [](auto& c) { return std::to_string(c.master_port.value_or(-1)); }, "1234"},
      {"--local-addr", "--local_addr", "PET_LOCAL_ADDR", "10.0.0.9",
       [](auto& c) { return c.local_addr.value_or("<none>"); }, "10.0.0.9"},
      {"--logs-specs", "--logs_specs", "", "mine",
       [](auto& c) { return c.logs_specs.value_or("<none>"); }, "mine"},
      {"--numa-binding", "--numa_binding", "", "socket",
       [](auto& c) { return std::to_string(static_cast<int>(c.numa_binding.value())); }, "1"},
      {"--signals-to-handle", "--signals_to_handle", "PET_SIGNALS_TO_HANDLE", "SIGUSR1",
       [](auto& c) { return std::to_string(c.signals_to_handle.at(0)); }, std::to_string(SIGUSR1)},
      {"--shutdown-timeout", "--shutdown_timeout", "PET_SHUTDOWN_TIMEOUT", "7",
       [](auto& c) { return std::to_string(c.shutdown_timeout_s.value_or(-1)); }, "7"},
      {"--worker-hang-timeout", "--worker_hang_timeout", "PET_WORKER_HANG_TIMEOUT", "2.5",
       [](auto& c) { return std::to_string(c.worker_hang_timeout_s.value_or(-1)); }, "2.500000"},
      {"--progress-timeout", "--progress_timeout", "PET_PROGRESS_TIMEOUT", "auto:30",
       [](auto& c) { return c.progress_timeout.value().describe(2); },
       "auto: 30 s (no interval seen yet; the floor is 30 s)"},
      {"--max-unproductive-restarts", "--max_unproductive_restarts",
       "PET_MAX_UNPRODUCTIVE_RESTARTS", "7",
       [](auto& c) { return std::to_string(c.max_unproductive_restarts); }, "7"},
      {"--health-check", "--health_check", "PET_HEALTH_CHECK", "nvidia-smi -L",
       [](auto& c) { return c.health_check.value_or("?"); }, "nvidia-smi -L"},
      {"--health-check-timeout", "--health_check_timeout", "PET_HEALTH_CHECK_TIMEOUT", "5",
       [](auto& c) { return std::to_string(c.health_check_timeout_s.value_or(-1)); }, "5.000000"},
      {"--metrics-port", "--metrics_port", "", "9464",
       [](auto& c) { return std::to_string(c.metrics_port.value_or(-1)); }, "9464"},
  };
}

std::vector<std::string> withScript(std::vector<std::string> args) {
  // --nnodes 2 (unless the case sets it) keeps the static backend.
  if (args.empty() || args[0] != "--nnodes") {
    args.insert(args.begin(), {"--nnodes", "2"});
  }
  args.push_back("train.py");
  return args;
}

TEST(CliOptions, EveryValueOptionInEverySpelling) {
  for (const auto& c : valueCases()) {
    for (const auto& name : {c.dashed, c.underscored}) {
      if (name.empty()) {
        continue;
      }
      SCOPED_TRACE(name);
      EXPECT_EQ(c.read(parse(withScript({name, c.value}))), c.expected);
      if (name.rfind("--", 0) == 0) {
        EXPECT_EQ(c.read(parse(withScript({name + "=" + c.value}))), c.expected);
      }
    }
  }
}

TEST(CliOptions, EveryEnvBackedOptionFallsBackToPet) {
  for (const auto& c : valueCases()) {
    if (c.pet.empty()) {
      continue;
    }
    SCOPED_TRACE(c.pet);
    EnvMap env{{c.pet, c.value}};
    if (c.pet != "PET_NNODES") {
      env["PET_NNODES"] = "2";
    }
    EXPECT_EQ(c.read(parse({"train.py"}, env)), c.expected);
  }
}

TEST(CliOptions, NonEnvBackedOptionsIgnorePet) {
  const auto config =
      parse({"--nnodes", "2", "train.py"},
            {{"PET_LOGS_SPECS", "x"}, {"PET_NUMA_BINDING", "node"}, {"PET_DRY_RUN", "1"}});
  EXPECT_FALSE(config.logs_specs);
  EXPECT_FALSE(config.numa_binding);
  EXPECT_FALSE(config.dry_run);  // an exported PET_DRY_RUN would silently skip every launch
}

// --metrics-port and --metrics-host: ddprun's own, with no PET_ fallback
// (torchrun has no such option); the endpoint's port is never the metrics'.
TEST(CliOptions, MetricsPortAndHost) {
  EXPECT_FALSE(parse({"train.py"}).metrics_port);
  EXPECT_EQ(parse({"--metrics-port", "0", "train.py"}).metrics_port, 0);
  const auto config = parse({"--metrics-port", "9464", "--metrics_host", "::1", "train.py"});
  EXPECT_EQ(config.metrics_host, "::1");
  EXPECT_FALSE(parse({"train.py"}, {{"PET_METRICS_PORT", "9464"}, {"PET_METRICS_HOST", "::1"}})
                   .metrics_port);
  EXPECT_EQ(parseError({"--metrics-port", "70000", "train.py"}),
            "--metrics-port '70000': must be between 0 and 65535");
  EXPECT_EQ(parseError({"--metrics-port", "1", "--metrics-host", "node0", "train.py"}),
            "--metrics-host 'node0': not an IP address");
  EXPECT_EQ(parseError({"--metrics-host", "127.0.0.1", "train.py"}),
            "--metrics-host needs --metrics-port");
  EXPECT_EQ(parseError({"--nnodes", "2", "--rdzv-backend", "c10d", "--rdzv-endpoint", "node0:29400",
                        "--metrics-port", "29400", "train.py"}),
            "--metrics-port 29400: the rendezvous endpoint's port; the metrics need a port of "
            "their own");
  EXPECT_EQ(parseError(
                {"--nnodes", "2", "--master-port", "29501", "--metrics-port", "29501", "train.py"}),
            "--metrics-port 29501: the rendezvous endpoint's port; the metrics need a port of "
            "their own");
}

TEST(CliOptions, DryRunIsAFlag) {
  EXPECT_FALSE(parse({"train.py"}).dry_run);
  EXPECT_TRUE(parse({"--dry-run", "train.py"}).dry_run);
  EXPECT_TRUE(parse({"--dry_run", "train.py"}).dry_run);
  EXPECT_EQ(parseError({"--dry-run=1", "train.py"}), "--dry-run '1': a flag takes no value");
}

TEST(CliOptions, CommandLineWinsOverPet) {
  const auto config = parse({"--nnodes", "2", "--nproc-per-node", "4", "--role", "a", "train.py"},
                            {{"PET_NPROC_PER_NODE", "16"}, {"PET_ROLE", "b"}, {"PET_NNODES", "9"}});
  EXPECT_EQ(config.nproc_per_node.count, 4);
  EXPECT_EQ(config.role, "a");
  EXPECT_EQ(config.max_nodes, 2);
}

TEST(CliOptions, LastRepeatWins) {
  EXPECT_EQ(parse({"--nnodes", "2", "--role", "a", "--role=b", "train.py"}).role, "b");
}

TEST(CliOptions, Defaults) {
  const auto config = parse({"--nnodes", "2", "train.py"});
  EXPECT_EQ(config.min_nodes, 2);
  EXPECT_EQ(config.nproc_per_node, NprocPerNode{});
  EXPECT_EQ(config.nproc_per_node.count, 1);
  EXPECT_EQ(config.rdzv_backend, "static");
  EXPECT_EQ(config.rdzv_endpoint, "127.0.0.1:29500");
  EXPECT_EQ(config.rdzv_id, "none");
  EXPECT_FALSE(config.standalone);
  EXPECT_EQ(config.max_restarts, 0);
  EXPECT_DOUBLE_EQ(config.monitor_interval_s, 0.1);
  EXPECT_EQ(config.start_method, StartMethod::kSpawn);
  EXPECT_EQ(config.event_log_handler, "null");
  EXPECT_EQ(config.role, "default");
  EXPECT_FALSE(config.module || config.no_python || config.run_path || config.virtual_local_rank);
  EXPECT_FALSE(config.log_dir);
  EXPECT_EQ(config.redirects, StdSpec{});
  EXPECT_EQ(config.tee.forLocalRank(0), Std::kNone);
  EXPECT_FALSE(config.log_line_prefix_template);
  EXPECT_FALSE(config.local_ranks_filter);
  EXPECT_TRUE(config.duplicate_stdout_filters.empty());
  EXPECT_TRUE(config.duplicate_stderr_filters.empty());
  EXPECT_EQ(config.node_rank, 0);
  EXPECT_EQ(config.master_addr, "127.0.0.1");
  EXPECT_FALSE(config.master_port);
  EXPECT_FALSE(config.local_addr);
  EXPECT_FALSE(config.logs_specs);
  EXPECT_FALSE(config.numa_binding);
  EXPECT_EQ(config.signals_to_handle, (std::vector<int>{SIGTERM, SIGINT, SIGHUP, SIGQUIT}));
  EXPECT_EQ(config.signals_to_handle_text, "SIGTERM,SIGINT,SIGHUP,SIGQUIT");
  EXPECT_FALSE(config.shutdown_timeout_s);
  EXPECT_EQ(config.shutdown_grace_s, 30);
  EXPECT_TRUE(config.warnings.empty());
  EXPECT_FALSE(config.show_help);
}

struct FlagCase {
  std::vector<std::string> spellings;
  std::string pet;
  std::function<bool(const LaunchConfig&)> read;
};

std::vector<FlagCase> flagCases() {
  return {
      {{"--standalone"}, "PET_STANDALONE", [](auto& c) { return c.standalone; }},
      {{"-m", "--module"}, "PET_MODULE", [](auto& c) { return c.module; }},
      {{"--no-python", "--no_python"}, "PET_NO_PYTHON", [](auto& c) { return c.no_python; }},
      {{"--run-path", "--run_path"}, "PET_RUN_PATH", [](auto& c) { return c.run_path; }},
      {{"--virtual-local-rank", "--virtual_local_rank"},
       "PET_VIRTUAL_LOCAL_RANK",
       [](auto& c) { return c.virtual_local_rank; }},
      {{"--no-slurm", "--no_slurm"}, "PET_NO_SLURM", [](auto& c) { return c.no_slurm; }},
  };
}

TEST(CliOptions, EveryFlagInEverySpellingAndItsPet) {
  for (const auto& c : flagCases()) {
    SCOPED_TRACE(c.pet);
    EXPECT_FALSE(c.read(parse({"train.py"})));
    for (const auto& name : c.spellings) {
      EXPECT_TRUE(c.read(parse({name, "train.py"}))) << name;
    }
    EXPECT_TRUE(c.read(parse({"train.py"}, {{c.pet, "1"}})));
    EXPECT_TRUE(c.read(parse({"train.py"}, {{c.pet, "-2"}})));
    EXPECT_TRUE(c.read(parse({"train.py"}, {{c.pet, " 7 "}})));
    EXPECT_FALSE(c.read(parse({"train.py"}, {{c.pet, "0"}})));
    // The flag on the command line wins over PET_X=0.
    EXPECT_TRUE(c.read(parse({c.spellings.back(), "train.py"}, {{c.pet, "0"}})));
    // Errors name the first long spelling.
    const auto canonical = c.spellings.front() == "-m" ? c.spellings[1] : c.spellings.front();
    EXPECT_EQ(parseError({"train.py"}, {{c.pet, "yes"}}),
              c.pet + " (" + canonical + ") 'yes': must be an integer (0 = off, non-zero = on)");
  }
}

TEST(CliOptions, ShortOptionsTakeAttachedValues) {
  const auto config = parse({"-r3", "-t", "1:1", "-m", "pkg.train"});
  EXPECT_EQ(config.redirects.forLocalRank(0), Std::kAll);
  EXPECT_EQ(config.tee.forLocalRank(1), Std::kOut);
  EXPECT_EQ(config.tee.forLocalRank(0), Std::kNone);
  EXPECT_TRUE(config.module);
  EXPECT_EQ(config.training_script, "pkg.train");
}

TEST(CliOptions, NprocKinds) {
  using Kind = NprocPerNode::Kind;
  EXPECT_EQ(parse({"--nproc-per-node", "gpu", "t.py"}).nproc_per_node.kind, Kind::kGpu);
  EXPECT_EQ(parse({"--nproc-per-node", "cpu", "t.py"}).nproc_per_node.kind, Kind::kCpu);
  EXPECT_EQ(parseError({"--nproc-per-node", "xpu", "t.py"}),
            "--nproc-per-node 'xpu': Intel XPUs are not supported by ddprun; give a count, cpu, "
            "gpu or auto");
  EXPECT_EQ(parse({"--nproc-per-node", "auto", "t.py"}).nproc_per_node.kind, Kind::kAuto);
}

// One table answers --help, completion and validation: every value it
// offers for an option is accepted when given (another flag the value needs
// may still be missing), and what is refused is never offered.
TEST(CliOptions, EveryValueTheTableOffersIsAccepted) {
  for (const OptionSpec& spec : optionTable()) {
    if (spec.hint != ValueHint::kChoices) {
      continue;
    }
    const std::string flag = canonicalFlag(spec);
    for (const std::string& value : choiceList(spec)) {
      const std::string error = parseError({flag, value, "t.py"});
      EXPECT_EQ(error.find(flag + " '" + value + "'"), std::string::npos) << error;
      EXPECT_EQ(error.find("not supported"), std::string::npos) << error;
    }
  }
  EXPECT_EQ(helpText().find("xpu"), std::string::npos) << "offered, then refused";
}

TEST(CliOptions, LogLinePrefixFallsBackToTorchelasticVariable) {
  const EnvMap env{{"TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE", "[${rank}]"}};
  EXPECT_EQ(parse({"t.py"}, env).log_line_prefix_template, "[${rank}]");
  EXPECT_EQ(parse({"--log-line-prefix-template", "X", "t.py"}, env).log_line_prefix_template, "X");
  EXPECT_EQ(parse({"t.py"}, {{"PET_LOG_LINE_PREFIX_TEMPLATE", "P"},
                             {"TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE", "T"}})
                .log_line_prefix_template,
            "P");
}

TEST(CliOptions, ShutdownGraceFromFlagThenTorchVariableThenThirty) {
  const EnvMap env{{"TORCH_ELASTIC_SHUTDOWN_TIMEOUT", "12"}};
  EXPECT_EQ(parse({"t.py"}, env).shutdown_grace_s, 12);
  EXPECT_EQ(parse({"--shutdown-timeout", "0", "t.py"}, env).shutdown_grace_s, 0);
  EXPECT_EQ(parse({"t.py"}).shutdown_grace_s, 30);
  EXPECT_EQ(parseError({"t.py"}, {{"TORCH_ELASTIC_SHUTDOWN_TIMEOUT", "soon"}}),
            "TORCH_ELASTIC_SHUTDOWN_TIMEOUT 'soon': not an integer");
}

// docs/torchrun-contract.md §7.1: torch 2.14's D-state check is off unless
// the variable holds a number above 0; seconds, with decimals, as torch
// reads it. What torch would read as 0 unseen (not a number) is refused.
TEST(CliOptions, UninterruptibleStateTimeoutIsTorchsVariableInSeconds) {
  EXPECT_FALSE(parse({"t.py"}).uninterruptible_state_timeout_s);
  EXPECT_FALSE(parse({"t.py"}, {{"TORCHELASTIC_UNINTERRUPTIBLE_STATE_TIMEOUT", ""}})
                   .uninterruptible_state_timeout_s);
  EXPECT_EQ(parse({"t.py"}, {{"TORCHELASTIC_UNINTERRUPTIBLE_STATE_TIMEOUT", "0"}})
                .uninterruptible_state_timeout_s,
            0.0);
  EXPECT_EQ(parse({"t.py"}, {{"TORCHELASTIC_UNINTERRUPTIBLE_STATE_TIMEOUT", "2.5"}})
                .uninterruptible_state_timeout_s,
            2.5);
  EXPECT_EQ(parseError({"t.py"}, {{"TORCHELASTIC_UNINTERRUPTIBLE_STATE_TIMEOUT", "soon"}}),
            "TORCHELASTIC_UNINTERRUPTIBLE_STATE_TIMEOUT 'soon': not a number");
  EXPECT_EQ(parseError({"t.py"}, {{"TORCHELASTIC_UNINTERRUPTIBLE_STATE_TIMEOUT", "-1"}}),
            "TORCHELASTIC_UNINTERRUPTIBLE_STATE_TIMEOUT '-1': must be 0 or more");
}

// docs/torchrun-contract.md §3.7: LOGLEVEL is torchrun's agent verbosity,
// Python's level names; ddprun takes them in any case and refuses the rest
// in one line, where torchrun dies of a ValueError.
TEST(CliOptions, LoglevelSetsTheAgentsVerbosityAsTorchrunNamesIt) {
  EXPECT_FALSE(parse({"t.py"}).log_level);
  EXPECT_FALSE(parse({"t.py"}, {{"LOGLEVEL", ""}}).log_level);
  EXPECT_EQ(parse({"t.py"}, {{"LOGLEVEL", "WARNING"}}).log_level, "warning");
  EXPECT_EQ(parse({"t.py"}, {{"LOGLEVEL", "warn"}}).log_level, "warning");
  EXPECT_EQ(parse({"t.py"}, {{"LOGLEVEL", "DEBUG"}}).log_level, "debug");
  EXPECT_EQ(parse({"t.py"}, {{"LOGLEVEL", "Error"}}).log_level, "error");
  EXPECT_EQ(parse({"t.py"}, {{"LOGLEVEL", "CRITICAL"}}).log_level, "critical");
  EXPECT_EQ(parse({"t.py"}, {{"LOGLEVEL", "NOTSET"}}).log_level, "warning");
  EXPECT_EQ(parseError({"t.py"}, {{"LOGLEVEL", "loud"}}),
            "LOGLEVEL 'loud': not a log level; use DEBUG, INFO, WARNING, ERROR or CRITICAL (as "
            "torchrun's Python logging names them)");
}

// docs/torchrun-contract.md §3.7: TORCHELASTIC_HEALTH_CHECK_PORT serves the
// agent's /healthz (the --metrics-port endpoint) on that port.
TEST(CliOptions, HealthCheckPortIsTheMetricsEndpointsPort) {
  EXPECT_FALSE(parse({"t.py"}).metrics_port);
  EXPECT_EQ(parse({"t.py"}, {{"TORCHELASTIC_HEALTH_CHECK_PORT", "9109"}}).metrics_port, 9109);
  EXPECT_EQ(parse({"t.py"}, {{"TORCHELASTIC_HEALTH_CHECK_PORT", "0"}}).metrics_port, 0);
  EXPECT_EQ(parse({"--metrics-port", "9109", "t.py"}, {{"TORCHELASTIC_HEALTH_CHECK_PORT", "9109"}})
                .metrics_port,
            9109);
  EXPECT_EQ(
      parseError({"--metrics-port", "9110", "t.py"}, {{"TORCHELASTIC_HEALTH_CHECK_PORT", "9109"}}),
      "TORCHELASTIC_HEALTH_CHECK_PORT 9109 and --metrics-port 9110: one endpoint serves "
      "/healthz and /metrics; give one port");
  EXPECT_EQ(parseError({"t.py"}, {{"TORCHELASTIC_HEALTH_CHECK_PORT", "http"}}),
            "TORCHELASTIC_HEALTH_CHECK_PORT 'http': not an integer");
}

// docs/torchrun-contract.md §7.6: torch's switch, its path or one in the
// temporary directory; the path alone turns nothing on.
TEST(CliOptions, FileTimerIsOnWhenTorchsSwitchIsOne) {
  EXPECT_FALSE(parse({"t.py"}).timer_file);
  EXPECT_FALSE(parse({"t.py"}, {{"TORCHELASTIC_TIMER_FILE", "/run/t"}}).timer_file);
  EXPECT_FALSE(parse({"t.py"}, {{"TORCHELASTIC_ENABLE_FILE_TIMER", "0"}}).timer_file);
  EXPECT_FALSE(parse({"t.py"}, {{"TORCHELASTIC_ENABLE_FILE_TIMER", "true"}}).timer_file);
  EXPECT_EQ(parse({"t.py"},
                  {{"TORCHELASTIC_ENABLE_FILE_TIMER", "1"}, {"TORCHELASTIC_TIMER_FILE", "/run/t"}})
                .timer_file,
            "/run/t");
  const auto chosen = parse({"t.py"}, {{"TORCHELASTIC_ENABLE_FILE_TIMER", "1"}}).timer_file;
  ASSERT_TRUE(chosen);
  EXPECT_EQ(chosen->rfind("/tmp/watchdog_timer_", 0), 0u) << *chosen;
  EXPECT_NE(*chosen, *parse({"t.py"}, {{"TORCHELASTIC_ENABLE_FILE_TIMER", "1"}}).timer_file)
      << "each run gets its own pipe";
  const auto in_tmpdir =
      parse({"t.py"}, {{"TORCHELASTIC_ENABLE_FILE_TIMER", "1"}, {"TMPDIR", "/scratch"}}).timer_file;
  EXPECT_EQ(in_tmpdir->rfind("/scratch/watchdog_timer_", 0), 0u) << *in_tmpdir;
}

TEST(CliOptions, WorkerHangTimeoutIsOffUnlessGiven) {
  EXPECT_FALSE(parse({"t.py"}).worker_hang_timeout_s);
  EXPECT_EQ(parse({"--worker-hang-timeout", "30", "t.py"}).worker_hang_timeout_s, 30.0);
}

TEST(CliOptions, EmptyLocalRanksFilterMeansAll) {
  EXPECT_FALSE(parse({"--local-ranks-filter", "", "t.py"}).local_ranks_filter);
}

TEST(CliOptions, HelpBeforeTheScriptAsksForHelp) {
  EXPECT_TRUE(parse({"--help"}).show_help);
  EXPECT_TRUE(parse({"-h", "t.py"}).show_help);
  EXPECT_FALSE(parse({"t.py", "--help"}).show_help);
}

TEST(CliOptions, UsageAndHelpNameTheOptions) {
  EXPECT_NE(usage().find("--nproc-per-node NPROC"), std::string::npos);
  EXPECT_NE(usage().find("training_script"), std::string::npos);
  EXPECT_NE(helpText().find("--nproc_per_node"), std::string::npos);
  EXPECT_NE(helpText().find("--signals-to-handle"), std::string::npos);
}

// argparse's layout: the usage (the program, its options, the script), the
// description, the positional arguments, then torchrun's groups in
// torchrun's order, ddprun's own last, each option under its group.
TEST(CliOptions, HelpIsLaidOutAsTorchrunsArgparseLaysItOut) {
  const std::string help = helpText();
  const std::string usage_paragraph = help.substr(0, help.find("\n\n"));
  EXPECT_EQ(usage_paragraph.rfind("usage: ddprun [-h] [--nnodes NNODES]", 0), 0u) << help;
  EXPECT_TRUE(usage_paragraph.ends_with("training_script ...")) << usage_paragraph;
  std::size_t at = 0;
  for (const std::string section :
       {"\npositional arguments:\n  training_script ", "\n  training_script_args ",
        "\noptions:\n  -h, --help ", "\nworker and node size:\n  --nnodes NNODES ",
        "\n  --nproc-per-node, --nproc_per_node NPROC\n", "\nrendezvous:\n  --rdzv-backend",
        "\n  --standalone ", "\nuser-code launch:\n  --max-restarts", "\n  -m, --module ",
        "\ntorch.distributed.launch compatibility, and later additions:\n  --node-rank",
        "\n  --print-completion, --print_completion SHELL\n",
        "\nddprun's own options:\n  --worker-hang-timeout"}) {
    const std::size_t found = help.find(section, at);
    ASSERT_NE(found, std::string::npos) << "missing or out of order: " << section << "\n" << help;
    at = found + section.size();
  }
  EXPECT_EQ(help.find("Usage:"), std::string::npos) << "CLI11's own usage line is gone";
}

// The parse's allocation-free questions agree with the list of spellings.
TEST(CliOptions, IsSpellingAndHasShortNameAgreeWithSpellings) {
  for (const OptionSpec& spec : optionTable()) {
    bool has_short = false;
    for (const std::string& spelling : spellings(spec)) {
      EXPECT_TRUE(isSpelling(spec, spelling)) << spelling;
      EXPECT_FALSE(isSpelling(spec, spelling.substr(0, spelling.size() - 1))) << spelling;
      EXPECT_FALSE(isSpelling(spec, spelling + "x")) << spelling;
      has_short = has_short || !spelling.starts_with("--");
    }
    EXPECT_EQ(hasShortName(spec), has_short) << spec.names;
    EXPECT_FALSE(isSpelling(spec, "")) << spec.names;
    if (std::string_view(spec.names).find(',') != std::string_view::npos) {
      EXPECT_FALSE(isSpelling(spec, spec.names)) << "the list is no spelling: " << spec.names;
    }
  }
}

}  // namespace
}  // namespace ddprun::launcher

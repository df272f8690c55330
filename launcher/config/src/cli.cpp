// CLI11 does the tokenising (both spellings, short options, repeated
// options) and stops at the script: prefix_command() hands the first
// positional and everything after it back untouched through remaining(), which
// is argparse.REMAINDER. Three things are done by hand, each for a reason noted
// where it happens: argparse's abbreviations and attached values
// (abbreviations.cpp), the PET_* fallback and the typed conversions. The
// options themselves are option_table.cpp's.
#include "ddprun/launcher/config/cli.hpp"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <limits>
#include <map>
#include <sstream>

#include "abbreviations.hpp"
#include "ddprun/launcher/config/option_table.hpp"
#include "ddprun/launcher/core/option_values.hpp"
#include "ddprun/launcher/core/progress_timeout.hpp"
#include "ddprun/net/asio.hpp"
#include "ddprun/proto/errors.hpp"
#include "ddprun/proto/random_bytes.hpp"
#include "derived_rules.hpp"
#include "help_formatter.hpp"
#include "operator_env.hpp"

namespace ddprun::launcher {
namespace {

constexpr int kIntMax = std::numeric_limits<int>::max();

// One option's text as the user supplied it, how to name it in an error,
// and where it came from ("flag" or "env:PET_<DEST>", see ValueSources).
struct Supplied {
  std::string text;
  std::string what;
  std::string source;
};

// argparse reads "--x=" (and PET_X="") as "": an unset variable in a job
// script, most likely, so one line says so where "" means nothing. A flag's
// PET_ value is read as an integer, which names an empty one.
Supplied refuseEmpty(Supplied supplied, const OptionSpec& spec) {
  if (supplied.text.empty() && !spec.is_flag && !takesEmptyValue(spec)) {
    throw ConfigError(supplied.what + ": empty value (an unset variable?); give " +
                      spec.value_name + " or leave it out");
  }
  return supplied;
}

// Whether CLI11 could read `spec` among `args`: an argument is one of its
// long spellings, alone or with "=value" (CLI11 goes on reading options
// after one it does not know, where argparseToCli11 stopped and left
// "--name=value" whole), or it has a short name (CLI11 reads "-mt" as
// "-m -t", and "-r3").
bool namedAmong(const OptionSpec& spec, const std::vector<std::string>& args) {
  return hasShortName(spec) || std::any_of(args.begin(), args.end(), [&spec](const auto& arg) {
           const std::string_view word = arg;
           return word.starts_with("--") && isSpelling(spec, word.substr(0, word.find('=')));
         });
}

// Parsed command line before conversion: CLI11 fills these by dest.
class RawCommandLine {
 public:
  // Every option (the help), or, given `args` as argparseToCli11 left them,
  // only those `args` name: an option not among them changes nothing CLI11
  // reads, and CLI11's add_option compares each new option with every
  // earlier one, three quarters of the parse with all ~100 registered.
  explicit RawCommandLine(CLI::App& app, const std::vector<std::string>* args = nullptr) {
    app.prefix_command();
    app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    app.set_help_flag("-h,--help", "show this help message and exit")->group("options");
    for (const auto& spec : optionTable()) {
      auto& slot = slots_[spec.dest];
      slot.spec = &spec;
      if (args != nullptr && !namedAmong(spec, *args)) {
        continue;
      }
      slot.option =
          spec.is_flag
              ? app.add_flag(spec.names, spec.help)
              : app.add_option(spec.names, slot.text, spec.help)->type_name(spec.value_name);
      slot.option->group(groupTitle(spec.group));
    }
  }

  // CLI wins; else PET_<DEST> for env-backed options. CLI11's envname() would
  // read getenv() directly, but the Environment is injected, so done here.
  std::optional<Supplied> value(const std::string& dest, const Environment& env) const {
    const Slot& slot = slots_.at(dest);
    const std::string flag = canonicalFlag(*slot.spec);
    if (slot.option != nullptr && slot.option->count() > 0) {
      return refuseEmpty(Supplied{slot.spec->is_flag ? "1" : slot.text, flag, "flag"}, *slot.spec);
    }
    if (slot.spec->env_backed) {
      const std::string pet = petName(*slot.spec);
      if (auto text = env(pet)) {
        return refuseEmpty(Supplied{*text, pet + " (" + flag + ")", "env:" + pet}, *slot.spec);
      }
    }
    return std::nullopt;
  }

 private:
  struct Slot {
    const OptionSpec* spec = nullptr;
    CLI::Option* option = nullptr;  // nullptr: not among the arguments
    std::string text;
  };
  std::map<std::string, Slot> slots_;
};

// Pulls typed values out of a RawCommandLine, one accessor per value kind.
class Reader {
 public:
  Reader(const RawCommandLine& raw, const Environment& env) : raw_(raw), env_(env) {}

  std::optional<Supplied> get(const std::string& dest) const { return raw_.value(dest, env_); }

  bool flag(const std::string& dest) const {
    const auto supplied = get(dest);
    return supplied && parseEnvBool(supplied->what, supplied->text);
  }
  std::string text(const std::string& dest, const std::string& fallback) const {
    const auto supplied = get(dest);
    return supplied ? supplied->text : fallback;
  }
  // Empty counts as absent, as torchrun's `if args.x:` tests do.
  std::optional<std::string> nonEmpty(const std::string& dest) const {
    const auto supplied = get(dest);
    if (!supplied || supplied->text.empty()) {
      return std::nullopt;
    }
    return supplied->text;
  }
  template <typename Parse>
  auto parsed(const std::string& dest, Parse parse) const
      -> std::optional<decltype(parse(std::string_view{}, std::string_view{}))> {
    const auto supplied = get(dest);
    if (!supplied) {
      return std::nullopt;
    }
    return parse(supplied->what, supplied->text);
  }

 private:
  const RawCommandLine& raw_;
  const Environment& env_;
};

void readLaunchShape(const Reader& in, LaunchConfig& config) {
  if (auto nodes = in.parsed("nnodes", parseNnodes)) {
    std::tie(config.min_nodes, config.max_nodes) = *nodes;
  }
  config.nproc_per_node = in.parsed("nproc_per_node", parseNprocPerNode).value_or(NprocPerNode{});
  config.rdzv_backend = in.text("rdzv_backend", "static");
  config.rdzv_endpoint = in.text("rdzv_endpoint", "");
  if (const auto id = in.get("rdzv_id")) {
    // The rendezvous keys its reserved keys by it (docs/rendezvous-protocol.md §2).
    if (id->text.size() > 256 || id->text.find('/') != std::string::npos) {
      failValue(id->what, id->text, "a run id is 1 to 256 bytes without '/'");
    }
    config.rdzv_id = id->text;
  }
  if (const auto conf = in.get("rdzv_conf")) {
    config.rdzv_conf = typeRdzvConf(conf->what, parseRdzvConf(conf->what, conf->text));
  }
  config.standalone = in.flag("standalone");
  const auto nonNegative = [](std::string_view what, std::string_view text) {
    return parseInt(what, text, 0, kIntMax);
  };
  config.max_restarts = in.parsed("max_restarts", nonNegative).value_or(0);
  config.monitor_interval_s = in.parsed("monitor_interval", parsePositiveDouble).value_or(0.1);
  config.start_method = in.parsed("start_method", parseStartMethod).value_or(StartMethod::kSpawn);
  config.node_rank = in.parsed("node_rank", nonNegative).value_or(0);
  config.master_addr = in.text("master_addr", "127.0.0.1");
  config.master_port = in.parsed("master_port", [](std::string_view what, std::string_view text) {
    return parseInt(what, text, 0, 65535);
  });
  config.local_addr = in.nonEmpty("local_addr");
}

void readWorkerOptions(const Reader& in, LaunchConfig& config) {
  config.role = in.text("role", "default");
  config.module = in.flag("module");
  config.no_python = in.flag("no_python");
  config.run_path = in.flag("run_path");
  config.virtual_local_rank = in.flag("virtual_local_rank");
  config.numa_binding = in.parsed("numa_binding", parseNumaBinding);
  if (const auto supplied = in.get("event_log_handler")) {
    const auto& name = supplied->text;
    if (name != "null" && name != "console" && name != "dynamic_rendezvous") {
      failValue(supplied->what, name, "expected null, console or dynamic_rendezvous");
    }
    config.event_log_handler = name;
  }
  const auto signals = in.get("signals_to_handle");
  if (signals) {
    config.signals_to_handle_text = signals->text;
  }
  config.signals_to_handle =
      parseSignals(signals ? signals->what : "--signals-to-handle", config.signals_to_handle_text);
  config.shutdown_timeout_s =
      in.parsed("shutdown_timeout", [](std::string_view what, std::string_view text) {
        return parseInt(what, text, 0, kIntMax);
      });
  config.worker_hang_timeout_s = in.parsed("worker_hang_timeout", parsePositiveDouble);
  config.progress_timeout = in.parsed("progress_timeout", parseProgressTimeout);
  config.max_unproductive_restarts =
      in.parsed("max_unproductive_restarts", [](std::string_view what, std::string_view text) {
          return parseInt(what, text, 0, kIntMax);
        }).value_or(3);
  if (const auto health_check = in.get("health_check")) {
    config.health_check = health_check->text;
  }
  config.health_check_timeout_s = in.parsed("health_check_timeout", parsePositiveDouble);
  config.no_slurm = in.flag("no_slurm");
  config.dry_run = in.flag("dry_run");
}

// The metrics' own port and address (no PET_ fallback: torchrun has no such
// option). The rendezvous endpoint's port is a store's, never the metrics'.
void readMetricsOptions(const Reader& in, LaunchConfig& config) {
  config.metrics_port = in.parsed("metrics_port", [](std::string_view what, std::string_view text) {
    return parseInt(what, text, 0, 65535);
  });
  if (const auto host = in.get("metrics_host")) {
    net::error_code error;
    net::asio::ip::make_address(host->text, error);
    if (error) {
      failValue(host->what, host->text, "not an IP address");
    }
    if (!config.metrics_port) {
      throw ConfigError(host->what + " needs --metrics-port");
    }
    config.metrics_host = host->text;
  }
}

// After the derived rules, which settle the endpoint's port.
void checkMetricsPort(const LaunchConfig& config) {
  if (config.metrics_port && *config.metrics_port != 0 && config.rdzv_address &&
      config.rdzv_address->port == *config.metrics_port) {
    throw ConfigError("--metrics-port " + std::to_string(*config.metrics_port) +
                      ": the rendezvous endpoint's port; the metrics need a port of their own");
  }
}

// --hostfile and its company; the hosts themselves are read by the launch.
void readMultihostOptions(const Reader& in, LaunchConfig& config) {
  config.hostfile = in.nonEmpty("hostfile");
  config.include_hosts = in.text("include", "");
  config.exclude_hosts = in.text("exclude", "");
  if (const auto ssh = in.get("ssh_command")) {
    std::istringstream words(ssh->text);
    config.ssh_command.clear();
    for (std::string word; words >> word;) {
      config.ssh_command.push_back(word);
    }
  }
  config.stdin_hangup = in.flag("stdin_hangup");
  for (const char* dest : {"include", "exclude", "ssh_command"}) {
    if (!config.hostfile && in.get(dest)) {
      throw ConfigError(in.get(dest)->what + " needs --hostfile");
    }
  }
  if (!config.include_hosts.empty() && !config.exclude_hosts.empty()) {
    throw ConfigError("--include and --exclude cannot be used together");
  }
  if (config.ssh_command.empty()) {
    throw ConfigError("--ssh-command: no command in it");
  }
  if (config.hostfile && !in.get("rdzv_backend")) {
    config.rdzv_backend = "c10d";  // the launch's agents meet so; no static rule applies
  }
}

void readLogOptions(const Reader& in, LaunchConfig& config) {
  config.log_dir = in.nonEmpty("log_dir");
  config.redirects = in.parsed("redirects", parseStdSpec).value_or(StdSpec{});
  config.tee = in.parsed("tee", parseStdSpec).value_or(StdSpec{});
  config.log_line_prefix_template = in.nonEmpty("log_line_prefix_template");
  if (const auto supplied = in.get("local_ranks_filter"); supplied && !supplied->text.empty()) {
    config.local_ranks_filter = parseRankList(supplied->what, supplied->text);
  }
  if (const auto supplied = in.get("ranks_filter"); supplied && !supplied->text.empty()) {
    config.ranks_filter = parseRankList(supplied->what, supplied->text, "ranks");
  }
  config.duplicate_stdout_filters = parseFilterList(in.text("duplicate_stdout_filters", ""));
  config.duplicate_stderr_filters = parseFilterList(in.text("duplicate_stderr_filters", ""));
  if (const auto specs = in.get("logs_specs")) {
    config.logs_specs = specs->text;  // never empty: torchrun finds no entry point named ""
  }
}

// Where every option the user gave came from; the derived rules add theirs.
ValueSources suppliedSources(const Reader& in) {
  ValueSources sources;
  for (const auto& spec : optionTable()) {
    if (const auto supplied = in.get(spec.dest)) {
      sources.emplace(spec.dest, supplied->source);
    }
  }
  return sources;
}

// remaining() is [script, args...] unless the user wrote an option CLI11 does
// not know (it lands in front of the script) or a leading "--".
void takeScript(std::vector<std::string> remaining, LaunchConfig& config) {
  if (!remaining.empty() && remaining.front() == "--") {
    remaining.erase(remaining.begin());
  }
  if (remaining.empty()) {
    throw ConfigError("the training script is missing (the first positional argument)");
  }
  const std::string& first = remaining.front();
  if (first.size() > 1 && first[0] == '-') {
    throw ConfigError("unrecognized option '" + first + "'");
  }
  config.training_script = first;
  config.training_script_args.assign(remaining.begin() + 1, remaining.end());
}

}  // namespace

std::string randomUuid() {
  unsigned char bytes[16];
  proto::fillRandom(bytes);
  bytes[6] = static_cast<unsigned char>((bytes[6] & 0x0f) | 0x40);  // version 4
  bytes[8] = static_cast<unsigned char>((bytes[8] & 0x3f) | 0x80);  // RFC 4122 variant
  std::string text;
  char hex[3];
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) {
      text += '-';
    }
    std::snprintf(hex, sizeof hex, "%02x", bytes[i]);
    text += hex;
  }
  return text;
}

LaunchConfig parseCommandLine(std::vector<std::string> args, const Environment& env,
                              const RunIdGenerator& make_run_id) {
  args = argparseToCli11(std::move(args));
  CLI::App app("ddprun");
  const RawCommandLine raw(app, &args);
  LaunchConfig config;
  const std::vector<std::string> canonical = args;
  std::reverse(args.begin(), args.end());  // CLI11's vector overload expects reversed order
  try {
    app.parse(args);
  } catch (const CLI::CallForHelp&) {
    config.show_help = true;
    return config;
  } catch (const CLI::ParseError& error) {
    throw ConfigError(error.what());
  }
  // Read as torchrun reads the environment, but for the values Kubernetes'
  // operators write that torchrun misreads (operator_env.hpp).
  const Environment read_env = withOperatorSpellings(env);
  const Reader reader(raw, read_env);
  // Like --help, these act at once: no script is needed, nothing else is read.
  if (reader.flag("version")) {
    config.show_version = true;
    return config;
  }
  if (const auto shell = reader.get("print_completion")) {
    // The table's values: what --help and completion offer is what is taken.
    const auto spec = std::find_if(optionTable().begin(), optionTable().end(), [](const auto& s) {
      return std::string_view(s.dest) == "print_completion";
    });
    const std::vector<std::string> shells = choiceList(*spec);
    if (std::find(shells.begin(), shells.end(), shell->text) == shells.end()) {
      failValue(shell->what, shell->text, "expected bash, tcsh or zsh");
    }
    config.print_completion = shell->text;
    return config;
  }
  readLaunchShape(reader, config);
  readWorkerOptions(reader, config);
  readLogOptions(reader, config);
  readMetricsOptions(reader, config);
  readMultihostOptions(reader, config);
  config.sources = suppliedSources(reader);
  config.option_args.assign(canonical.begin(),
                            canonical.end() - static_cast<std::ptrdiff_t>(app.remaining().size()));
  noteOperatorSpellings(config, env);
  takeScript(app.remaining(), config);
  applyDerivedRules(config, env, make_run_id);
  checkMetricsPort(config);
  return config;
}

std::string usage() {
  std::string text = "usage: ddprun [-h]";
  std::string line = text;
  for (const auto& spec : optionTable()) {
    std::string item =
        " [" + canonicalFlag(spec) + (spec.is_flag ? "" : std::string(" ") + spec.value_name) + "]";
    if (line.size() + item.size() > 80) {
      text += "\n             ";
      line = "             ";
    }
    text += item;
    line += item;
  }
  text += "\n              training_script ...\n";
  return text;
}

std::string helpText() {
  CLI::App app(
      "ddprun, a drop-in for torchrun (torch.distributed.run): starts and supervises the workers "
      "of\na distributed PyTorch job on this node. Every option but --logs-specs, --numa-binding,"
      "\n--print-completion, --dry-run, --metrics-* and --version also reads PET_<OPTION> from\n"
      "the environment (PET_NPROC_PER_NODE); the command line wins. A long option but\n"
      "--version may be abbreviated to any unambiguous prefix. Under srun, with no rendezvous\n"
      "option given, the launch is derived from the Slurm step (--no-slurm: never).");
  RawCommandLine raw(app);
  app.formatter(argparseStyleFormatter(usage()));
  return app.help();
}

}  // namespace ddprun::launcher

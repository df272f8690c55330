// An empty value, "--opt=" (or "--opt ''", PET_OPT=""), as torchrun's
// argparse reads it: the empty string, never the next argument
// (docs/torchrun-contract.md §2.1). Kept where torchrun gives "" a meaning,
// refused in one line naming the option elsewhere; the script's arguments
// are never touched.
#include <gtest/gtest.h>

#include <algorithm>

#include "ddprun/launcher/config/option_table.hpp"
#include "launcher_test_util.hpp"

namespace ddprun::launcher {
namespace {

using testing::EnvMap;
using testing::parse;
using testing::parseError;

std::string refusal(const std::string& what, const std::string& value_name) {
  return what + ": empty value (an unset variable?); give " + value_name + " or leave it out";
}

// Every value option torchrun fails on when "" (or, --rdzv-id, makes up a
// run id per node for), with its value name, by kind.
const std::vector<std::pair<std::string, std::string>> kRefused = {
    // text
    {"--rdzv-id", "ID"},
    {"--health-check", "CMD"},
    {"--master-addr", "ADDR"},
    {"--logs-specs", "NAME"},
    {"--signals-to-handle", "SIGNALS"},
    {"--metrics-host", "ADDR"},
    {"--hostfile", "FILE"},
    {"--include", "SPEC"},
    {"--exclude", "SPEC"},
    {"--ssh-command", "CMD"},
    // integers and numbers
    {"--nnodes", "NNODES"},
    {"--max-restarts", "N"},
    {"--node-rank", "RANK"},
    {"--master-port", "PORT"},
    {"--shutdown-timeout", "SECONDS"},
    {"--metrics-port", "PORT"},
    {"--monitor-interval", "SECONDS"},
    {"--worker-hang-timeout", "SECONDS"},
    {"--progress-timeout", "SECONDS|auto"},
    {"--max-unproductive-restarts", "N"},
    {"--health-check-timeout", "SECONDS"},
    // choices
    {"--nproc-per-node", "NPROC"},
    {"--rdzv-backend", "BACKEND"},
    {"--start-method", "METHOD"},
    {"--event-log-handler", "HANDLER"},
    {"--redirects", "STD"},
    {"--tee", "STD"},
    {"--numa-binding", "MODE"},
    {"--print-completion", "SHELL"},
};

// Those whose "" torchrun takes: its default, "not given", or (--role) as is.
const std::vector<std::string> kTaken = {
    "--rdzv-endpoint",
    "--rdzv-conf",
    "--role",
    "--log-dir",
    "--log-line-prefix-template",
    "--local-ranks-filter",
    "--ranks-filter",
    "--duplicate-stdout-filters",
    "--duplicate-stderr-filters",
    "--local-addr",
};

TEST(CliEmptyValues, EveryValueOptionIsRefusedOrTaken) {
  for (const OptionSpec& spec : optionTable()) {
    if (spec.is_flag) {
      continue;
    }
    const std::string flag = canonicalFlag(spec);
    const bool refused = std::any_of(kRefused.begin(), kRefused.end(),
                                     [&](const auto& entry) { return entry.first == flag; });
    const bool taken = std::find(kTaken.begin(), kTaken.end(), flag) != kTaken.end();
    EXPECT_NE(refused, taken) << flag << ": classify its empty value here";
  }
}

// "--rdzv-id=" used to take "--rdzv-backend=c10d" as the run id.
TEST(CliEmptyValues, AnAttachedEmptyValueNeverTakesTheNextArgument) {
  for (const std::string spelling : {"--rdzv-id=", "--rdzv_id=", "--rdzv-i=", "--rdzv_i="}) {
    SCOPED_TRACE(spelling);
    EXPECT_EQ(parseError({"--nnodes=2", spelling, "--rdzv-backend=c10d", "t.py"}),
              refusal("--rdzv-id", "ID"));
    EXPECT_EQ(parseError({"--nnodes=2", spelling, "--log-dir", "X", "t.py"}),
              refusal("--rdzv-id", "ID"));
  }
}

TEST(CliEmptyValues, EachRefusedOptionNamesItselfInEverySpelling) {
  for (const auto& [flag, value_name] : kRefused) {
    std::string underscored = flag;
    std::replace(underscored.begin() + 2, underscored.end(), '-', '_');
    for (const std::string& spelling : {flag, underscored}) {
      SCOPED_TRACE(spelling);
      EXPECT_EQ(parseError({spelling + "=", "--no-python", "t.py"}), refusal(flag, value_name));
      EXPECT_EQ(parseError({spelling, "", "--no-python", "t.py"}), refusal(flag, value_name));
    }
  }
}

TEST(CliEmptyValues, ShortOptionsReadAnAttachedValueAsArgparseDoes) {
  EXPECT_EQ(parse({"-r=3", "t.py"}).redirects.forLocalRank(0), Std::kAll);
  EXPECT_EQ(parse({"-t=0:2", "t.py"}).tee.forLocalRank(0), Std::kErr);
  EXPECT_EQ(parseError({"-r=", "-t", "3", "t.py"}), refusal("--redirects", "STD"));
  EXPECT_EQ(parseError({"-t=", "--no-python", "t.py"}), refusal("--tee", "STD"));
}

// Each taken "" leaves the option at what torchrun makes of it, and the
// next argument (a flag here) stays an argument of its own.
TEST(CliEmptyValues, TakenEmptyValuesLeaveTheNextArgumentAlone) {
  const auto taken = [](const std::string& assignment) {
    return parse({"--nnodes=2", assignment, "--no-python", "echo", "HI"});
  };
  for (const std::string& assignment : kTaken) {
    SCOPED_TRACE(assignment);
    const LaunchConfig config = taken(assignment + "=");
    EXPECT_TRUE(config.no_python);
    EXPECT_EQ(config.training_script, "echo");
    EXPECT_EQ(config.training_script_args, std::vector<std::string>{"HI"});
  }
  EXPECT_EQ(taken("--rdzv-endpoint=").rdzv_endpoint, "127.0.0.1:29500");  // the static default
  EXPECT_EQ(taken("--rdzv-conf=").rdzv_conf, RdzvConf{});
  EXPECT_EQ(taken("--role=").role, "");
  EXPECT_FALSE(taken("--log-dir=").log_dir);
  EXPECT_FALSE(taken("--log_dir=").log_dir);
  EXPECT_FALSE(taken("--log-d=").log_dir);
  EXPECT_FALSE(taken("--log-line-prefix-template=").log_line_prefix_template);
  EXPECT_FALSE(taken("--local-ranks-filter=").local_ranks_filter);
  EXPECT_FALSE(taken("--ranks-filter=").ranks_filter);
  EXPECT_TRUE(taken("--duplicate-stdout-filters=").duplicate_stdout_filters.empty());
  EXPECT_FALSE(taken("--local-addr=").local_addr);
}

TEST(CliEmptyValues, ThePetVariablesFollowTheSameRule) {
  EXPECT_EQ(parseError({"--nnodes=2", "t.py"}, {{"PET_RDZV_ID", ""}}),
            refusal("PET_RDZV_ID (--rdzv-id)", "ID"));
  EXPECT_EQ(parseError({"t.py"}, {{"PET_MAX_RESTARTS", ""}}),
            refusal("PET_MAX_RESTARTS (--max-restarts)", "N"));
  EXPECT_FALSE(parse({"t.py"}, {{"PET_LOG_DIR", ""}}).log_dir);
  // The command line's value wins before the variable is read.
  EXPECT_EQ(parse({"--nnodes=2", "--rdzv-id=job", "t.py"}, {{"PET_RDZV_ID", ""}}).rdzv_id, "job");
}

TEST(CliEmptyValues, TheScriptsArgumentsKeepTheirEmptyValues) {
  const auto config = parse({"--rdzv-endpoint=", "--role=", "t.py", "--rdzv-id=", "--lr=", "x"});
  EXPECT_EQ(config.training_script, "t.py");
  EXPECT_EQ(config.training_script_args, (std::vector<std::string>{"--rdzv-id=", "--lr=", "x"}));
}

}  // namespace
}  // namespace ddprun::launcher

// The script and its verbatim arguments, bad flags, and torchrun's derived
// rules: --standalone, single-node auto-port, the static endpoint, the
// rendezvous config and the warnings.
#include <gtest/gtest.h>

#include "launcher_test_util.hpp"

namespace ddprun::launcher {
namespace {

using testing::kTestRunId;
using testing::parse;
using testing::parseError;

using Args = std::vector<std::string>;

TEST(CliPassthrough, EverythingAfterTheScriptIsVerbatim) {
  const auto config = parse({"--nproc-per-node", "2", "train.py", "--lr", "0.1", "--nproc-per-node",
                             "3", "-m", "--", "--standalone", "x"});
  EXPECT_EQ(config.nproc_per_node.count, 2);
  EXPECT_FALSE(config.module);
  EXPECT_FALSE(config.standalone);
  EXPECT_EQ(config.training_script, "train.py");
  EXPECT_EQ(config.training_script_args,
            (Args{"--lr", "0.1", "--nproc-per-node", "3", "-m", "--", "--standalone", "x"}));
}

TEST(CliPassthrough, HelpAndEqualsFormsAfterTheScriptBelongToTheScript) {
  const auto config = parse({"train.py", "--help", "--nnodes=2", "${local_rank}"});
  EXPECT_FALSE(config.show_help);
  EXPECT_EQ(config.max_nodes, 1);
  EXPECT_EQ(config.training_script_args, (Args{"--help", "--nnodes=2", "${local_rank}"}));
}

TEST(CliPassthrough, OptionValueIsNotTakenForTheScript) {
  const auto config = parse({"--role", "train.py", "real.py", "a"});
  EXPECT_EQ(config.role, "train.py");
  EXPECT_EQ(config.training_script, "real.py");
  EXPECT_EQ(config.training_script_args, Args{"a"});
}

TEST(CliPassthrough, DoubleDashBeforeTheScriptIsDropped) {
  const auto config = parse({"--nnodes", "2", "--", "train.py", "--x"});
  EXPECT_EQ(config.training_script, "train.py");
  EXPECT_EQ(config.training_script_args, Args{"--x"});
}

TEST(CliPassthrough, EmptyAndSpacedArgumentsSurvive) {
  const auto config = parse({"t.py", "", "a b", "'q'"});
  EXPECT_EQ(config.training_script_args, (Args{"", "a b", "'q'"}));
}

TEST(CliErrors, MissingScript) {
  EXPECT_EQ(parseError({"--nnodes", "2"}),
            "the training script is missing (the first positional argument)");
  EXPECT_EQ(parseError({}), "the training script is missing (the first positional argument)");
}

TEST(CliErrors, UnknownOption) {
  EXPECT_EQ(parseError({"--nprocs", "2", "t.py"}), "unrecognized option '--nprocs'");
  EXPECT_EQ(parseError({"--bogus=1", "t.py"}), "unrecognized option '--bogus=1'");
}

TEST(CliErrors, MissingValueNamesTheFlag) {
  EXPECT_NE(parseError({"--nnodes"}).find("--nnodes"), std::string::npos);
}

TEST(CliErrors, OneLineNamingTheFlagForEveryTypedOption) {
  const std::vector<std::pair<Args, std::string>> cases = {
      {{"--nnodes", "3:2"}, "--nnodes '3:2': MIN must not exceed MAX"},
      {{"--nnodes", "0"}, "--nnodes '0': node counts must be greater than 0"},
      {{"--nnodes", "1:2:3"}, "--nnodes '1:2:3': expected N or MIN:MAX"},
      {{"--nnodes", "two"}, "--nnodes 'two': expected N or MIN:MAX with integers"},
      {{"--nproc_per_node", "tpu"},
       "--nproc-per-node 'tpu': expected a positive integer or cpu, gpu, auto"},
      {{"--nproc-per-node", "0"}, "--nproc-per-node '0': must be >= 1"},
      {{"--max-restarts", "-1"}, "--max-restarts '-1': must be >= 0"},
      {{"--max_restarts", "x"}, "--max-restarts 'x': not an integer"},
      {{"--monitor-interval", "0"}, "--monitor-interval '0': must be greater than 0"},
      {{"--monitor-interval", "fast"}, "--monitor-interval 'fast': not a number"},
      {{"--start-method", "thread"}, "--start-method 'thread': expected spawn, fork or forkserver"},
      {{"--event-log-handler", "file"},
       "--event-log-handler 'file': expected null, console or dynamic_rendezvous"},
      {{"-r", "4"},
       "--redirects '4': expected 0-3 or a map LOCAL_RANK:0-3,... with single-digit ranks"},
      {{"--tee", "10:1"},
       "--tee '10:1': expected 0-3 or a map LOCAL_RANK:0-3,... with single-digit ranks"},
      {{"--local-ranks-filter", "0,a"},
       "--local-ranks-filter '0,a': expected a comma-separated list of local ranks (integers >= "
       "0)"},
      {{"--ranks-filter", "-1"},
       "--ranks-filter '-1': expected a comma-separated list of ranks (integers >= 0)"},
      {{"--node-rank", "-1"}, "--node-rank '-1': must be >= 0"},
      {{"--master-port", "70000"}, "--master-port '70000': must be between 0 and 65535"},
      {{"--numa-binding", "all"},
       "--numa-binding 'all': expected node, socket, exclusive or core-complex"},
      {{"--signals-to-handle", "SIGFOO"},
       "--signals-to-handle 'SIGFOO': unknown signal name 'SIGFOO' (use names like SIGUSR1)"},
      {{"--signals-to-handle", "SIGTERM,SIGKILL"},
       "--signals-to-handle 'SIGTERM,SIGKILL': SIGKILL cannot be caught"},
      {{"--shutdown-timeout", "-5"}, "--shutdown-timeout '-5': must be >= 0"},
      {{"--worker-hang-timeout", "0"}, "--worker-hang-timeout '0': must be greater than 0"},
      {{"--worker-hang-timeout", "soon"}, "--worker-hang-timeout 'soon': not a number"},
      {{"--progress-timeout", "0"},
       "--progress-timeout '0': expected a number of seconds greater than 0, or "
       "auto[:FLOOR_SECONDS]"},
      {{"--progress-timeout", "auto:soon"},
       "--progress-timeout 'auto:soon': 'auto' takes an optional floor in seconds, as in auto:120"},
      {{"--rdzv-conf", "a=1,=2"},
       "--rdzv-conf 'a=1,=2': expected KEY=VALUE,... (an item has no key)"},
      {{"--rdzv-conf", "timeout"}, "--rdzv-conf 'timeout': option 'timeout' has no value"},
      {{"--rdzv-backend", "c10d", "--rdzv-endpoint", "host:port"},
       "--rdzv-endpoint 'host:port': the port must be an integer between 0 and 65535"},
      {{"--print-completion", "fish"}, "--print-completion 'fish': expected bash, tcsh or zsh"},
      {{"--no-python", "-m"}, "--no-python and --module cannot be used together"},
  };
  for (const auto& [args, expected] : cases) {
    Args full = args;
    full.push_back("t.py");
    EXPECT_EQ(parseError(full), expected);
  }
}

TEST(CliErrors, PetErrorsNameTheVariableAndTheFlag) {
  EXPECT_EQ(parseError({"t.py"}, {{"PET_NNODES", "3:2"}}),
            "PET_NNODES (--nnodes) '3:2': MIN must not exceed MAX");
  EXPECT_EQ(parseError({"t.py"}, {{"PET_MAX_RESTARTS", "many"}}),
            "PET_MAX_RESTARTS (--max-restarts) 'many': not an integer");
  // An explicit flag means the bad PET_ value is never looked at.
  EXPECT_EQ(parseError({"--max-restarts", "1", "t.py"}, {{"PET_MAX_RESTARTS", "many"}}),
            "<no error>");
}

TEST(CliErrors, RunPathWinsOverNoPythonWithModule) {
  EXPECT_EQ(parseError({"--run-path", "--no-python", "-m", "/t.py"}), "<no error>");
}

TEST(CliStandalone, ForcesC10dLocalhostAndAFreshRunId) {
  const auto config = parse({"--standalone", "--nnodes", "1:2", "--rdzv-backend", "static",
                             "--rdzv-endpoint", "elsewhere:5", "--rdzv-id", "mine", "t.py"});
  EXPECT_TRUE(config.standalone);
  EXPECT_FALSE(config.auto_standalone);
  EXPECT_EQ(config.rdzv_backend, "c10d");
  EXPECT_EQ(config.rdzv_endpoint, "localhost:0");
  EXPECT_EQ(config.rdzv_address, (Endpoint{"localhost", 0}));
  EXPECT_EQ(config.rdzv_id, kTestRunId);
  EXPECT_EQ(config.rdzv_conf, RdzvConf{});
  EXPECT_TRUE(config.warnings.empty());
}

TEST(CliStandalone, RealRunIdsAreFreshUuids) {
  const auto a = parseCommandLine({"--standalone", "t.py"}, mapEnvironment({})).rdzv_id;
  const auto b = parseCommandLine({"--standalone", "t.py"}, mapEnvironment({})).rdzv_id;
  EXPECT_NE(a, b);
  ASSERT_EQ(a.size(), 36u);
  EXPECT_EQ(a[8], '-');
  EXPECT_EQ(a[14], '4');
}

TEST(CliAutoPort, SingleNodeStaticWithoutPortBecomesStandalone) {
  const auto config = parse({"t.py"});
  EXPECT_TRUE(config.auto_standalone);
  EXPECT_FALSE(config.standalone);
  EXPECT_EQ(config.rdzv_backend, "c10d");
  EXPECT_EQ(config.rdzv_endpoint, "localhost:0");
  EXPECT_EQ(config.rdzv_id, kTestRunId);
  EXPECT_TRUE(config.warnings.empty());
}

TEST(CliAutoPort, AnyOfItsConditionsFailingKeepsStatic) {
  const std::vector<std::pair<Args, testing::EnvMap>> cases = {
      {{"--master-port", "29500"}, {}},
      {{}, {{"PET_MASTER_PORT", "29501"}}},
      {{"--nnodes", "1:2"}, {}},
      {{"--rdzv-endpoint", "h:1"}, {}},
  };
  for (const auto& [args, env] : cases) {
    Args full = args;
    full.push_back("t.py");
    const auto config = parse(full, env);
    EXPECT_EQ(config.rdzv_backend, "static") << ::testing::PrintToString(args);
    EXPECT_FALSE(config.auto_standalone);
  }
  EXPECT_EQ(parse({"--rdzv-backend", "c10d", "t.py"}).rdzv_endpoint, "");
}

TEST(CliStatic, EndpointFromMasterAddrAndPortAndRankInConf) {
  const auto config = parse({"--nnodes", "1:3", "--node-rank", "2", "--master-addr", "[::1]",
                             "--master-port", "1234", "--rdzv-conf", "timeout=60", "t.py"});
  EXPECT_EQ(config.rdzv_endpoint, "[::1]:1234");
  EXPECT_EQ(config.rdzv_address, (Endpoint{"::1", 1234}));
  EXPECT_EQ(config.max_nodes, 3);  // the static world size comes from max nodes
  EXPECT_EQ(config.rdzv_conf.staticTimeout(), std::chrono::seconds(60));
}

TEST(CliStatic, DefaultMasterPortIs29500AndEndpointNeedsAPort) {
  EXPECT_EQ(parse({"--nnodes", "2", "t.py"}).rdzv_address, (Endpoint{"127.0.0.1", 29500}));
  EXPECT_EQ(parseError({"--nnodes", "2", "--rdzv-endpoint", "host", "t.py"}),
            "--rdzv-endpoint 'host': the static backend needs a port (try --master-port)");
}

TEST(CliC10d, DefaultPortAndIpv6Endpoint) {
  EXPECT_EQ(parse({"--rdzv-backend", "c10d", "--rdzv-endpoint", "node1", "t.py"}).rdzv_address,
            (Endpoint{"node1", 29400}));
  EXPECT_EQ(
      parse({"--rdzv-backend", "c10d", "--rdzv-endpoint", "[fe80::1]:5", "t.py"}).rdzv_address,
      (Endpoint{"fe80::1", 5}));
  EXPECT_EQ(parse({"--rdzv-backend", "c10d", "t.py"}).rdzv_address, (Endpoint{"localhost", 29400}));
  EXPECT_EQ(parse({"--rdzv-backend", "etcd-v2", "--rdzv-endpoint", "e", "t.py"}).rdzv_address,
            (Endpoint{"e", 2379}));
  EXPECT_FALSE(parse({"--rdzv-backend", "plugin", "t.py"}).rdzv_address);
}

TEST(CliC10d, UserJoinTimeoutKept) {
  const auto config = parse({"--rdzv-backend", "c10d", "--rdzv-conf", "join_timeout=9", "t.py"});
  EXPECT_EQ(config.rdzv_conf.joinTimeout(), std::chrono::seconds(9));
  EXPECT_EQ(config.rdzv_conf.staticTimeout(), std::chrono::seconds(900));
}

// A static --rdzv-endpoint is the store's address: --master-addr and
// --master-port only build the endpoint when none is given.
TEST(CliStatic, AGivenEndpointIsTheStoreNotTheMasterFlags) {
  const auto config = parse({"--nnodes", "2", "--rdzv-endpoint", "host0:29603", "--master-addr",
                             "elsewhere", "--master-port", "1", "t.py"});
  EXPECT_EQ(config.rdzv_backend, "static");
  EXPECT_EQ(config.rdzv_address, (Endpoint{"host0", 29603}));
}

TEST(CliWarnings, MasterAddrAndNodeRankWithNonStatic) {
  const auto both = parse({"--rdzv-backend", "c10d", "--node-rank", "1", "t.py"}).warnings;
  ASSERT_EQ(both.size(), 2u);
  EXPECT_NE(both[0].find("master_addr is only used for static"), std::string::npos);
  EXPECT_NE(both[1].find("node_rank is only used for static"), std::string::npos);
  EXPECT_TRUE(parse({"--rdzv-backend", "c10d", "--rdzv-endpoint", "h", "t.py"}).warnings.empty());
  EXPECT_TRUE(parse({"--nnodes", "2", "--node-rank", "1", "t.py"}).warnings.empty());
}

// The run id keys every reserved rendezvous key: '/' or an empty or huge id
// would make keys the rendezvous cannot parse.
TEST(CliRdzvId, ARunIdIsOneTo256BytesWithoutASlash) {
  EXPECT_EQ(parse({"--nnodes", "2", "--rdzv-id", std::string(256, 'j'), "t.py"}).rdzv_id,
            std::string(256, 'j'));
  EXPECT_EQ(parseError({"--rdzv-id", "a/b", "t.py"}),
            "--rdzv-id 'a/b': a run id is 1 to 256 bytes without '/'");
  EXPECT_EQ(parseError({"--rdzv-id", "", "t.py"}),
            "--rdzv-id: empty value (an unset variable?); give ID or leave it out");
  EXPECT_NE(parseError({"--rdzv-id", std::string(257, 'j'), "t.py"}), "<no error>");
  EXPECT_EQ(parseError({"t.py"}, {{"PET_RDZV_ID", "x/y"}}),
            "PET_RDZV_ID (--rdzv-id) 'x/y': a run id is 1 to 256 bytes without '/'");
}

}  // namespace
}  // namespace ddprun::launcher

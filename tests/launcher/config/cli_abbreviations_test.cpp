// Long options read as torchrun's argparse reads them
// (docs/torchrun-contract.md §2.1): any unambiguous prefix, in either
// spelling, names its option; an ambiguous one is refused naming the
// candidates; a flag takes no value; nothing from the script on is touched.
#include <gtest/gtest.h>

#include "launcher_test_util.hpp"

namespace ddprun::launcher {
namespace {

using testing::parse;
using testing::parseError;

TEST(CliAbbreviations, TheIssuesThreeAbbreviationsAreAccepted) {
  const auto config = parse({"--nproc", "2", "--max_res", "1", "--stand", "t.py"});
  EXPECT_EQ(config.nproc_per_node.count, 2);
  EXPECT_EQ(config.max_restarts, 1);
  EXPECT_TRUE(config.standalone);
}

TEST(CliAbbreviations, PrefixesInBothSpellingsAndWithEquals) {
  EXPECT_EQ(parse({"--nproc=3", "t.py"}).nproc_per_node.count, 3);
  EXPECT_EQ(parse({"--nproc_per=4", "t.py"}).nproc_per_node.count, 4);
  EXPECT_EQ(parse({"--nproc-p", "5", "t.py"}).nproc_per_node.count, 5);
  EXPECT_EQ(parse({"--max-r=2", "t.py"}).max_restarts, 2);
  EXPECT_EQ(parse({"--nnodes", "2", "--rdzv-i", "job", "t.py"}).rdzv_id, "job");
  EXPECT_EQ(parse({"--nnodes", "2", "--rdzv_id=job", "t.py"}).rdzv_id, "job");
  EXPECT_EQ(parse({"--nnodes", "2", "--master-a", "10.0.0.1", "t.py"}).master_addr, "10.0.0.1");
  EXPECT_EQ(parse({"--ro", "trainer", "t.py"}).role, "trainer");
  EXPECT_EQ(parse({"--te", "3", "t.py"}).tee.forLocalRank(0), Std::kAll);
  EXPECT_EQ(parse({"--redir", "1", "t.py"}).redirects.forLocalRank(0), Std::kOut);
  EXPECT_TRUE(parse({"--mod", "pkg.train"}).module);
  EXPECT_TRUE(parse({"--no-p", "./a.out"}).no_python);
  EXPECT_TRUE(parse({"--virtual_l", "t.py"}).virtual_local_rank);
  EXPECT_TRUE(parse({"--he"}).show_help);
  EXPECT_EQ(parse({"--max", "4", "t.py"}).max_restarts, 4) << "not --max-unproductive-restarts";
  EXPECT_EQ(parse({"--print-c", "zsh"}).print_completion, "zsh");
}

TEST(CliAbbreviations, AmbiguousPrefixesNameTheirCandidatesOncePerOption) {
  EXPECT_EQ(parseError({"--r", "x", "t.py"}),
            "ambiguous option: --r could match --rdzv-backend, --rdzv-endpoint, --rdzv-id, "
            "--rdzv-conf, --role, --run-path, --redirects, --ranks-filter");
  EXPECT_EQ(parseError({"--rdzv_", "x", "t.py"}),
            "ambiguous option: --rdzv_ could match --rdzv_backend, --rdzv_endpoint, --rdzv_id, "
            "--rdzv_conf");
  EXPECT_EQ(parseError({"--no=1", "t.py"}),
            "ambiguous option: --no could match --no-python, --node-rank, --no-slurm");
  EXPECT_EQ(parseError({"--lo", "x", "t.py"}),
            "ambiguous option: --lo could match --log-dir, --log-line-prefix-template, "
            "--local-ranks-filter, --local-addr, --logs-specs");
}

TEST(CliAbbreviations, ValuesAndErrorsNameTheWholeOption) {
  EXPECT_EQ(parseError({"--nproc", "banana", "t.py"}).rfind("--nproc-per-node 'banana'", 0), 0u)
      << parseError({"--nproc", "banana", "t.py"});
  EXPECT_EQ(parseError({"--nproc"}), "--nproc-per-node: 1 required NPROC missing");
  EXPECT_EQ(parseError({"--bogus", "t.py"}), "unrecognized option '--bogus'");
}

TEST(CliAbbreviations, AFlagGivenAValueIsRefusedNamingIt) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--standalone=1", "--standalone '1': a flag takes no value"},
      {"--standalone=0", "--standalone '0': a flag takes no value"},
      {"--stand=", "--standalone '': a flag takes no value"},
      {"--module=yes", "--module 'yes': a flag takes no value"},
      {"-m=1", "--module '1': a flag takes no value"},
      {"--no_python=1", "--no-python '1': a flag takes no value"},
      {"--run-path=1", "--run-path '1': a flag takes no value"},
      {"--virtual-local-rank=1", "--virtual-local-rank '1': a flag takes no value"},
      {"--help=1", "--help '1': a flag takes no value"},
  };
  for (const auto& [arg, expected] : cases) {
    EXPECT_EQ(parseError({arg, "t.py"}), expected) << arg;
  }
}

TEST(CliAbbreviations, TheScriptsArgumentsAreNeverExpanded) {
  const auto config =
      parse({"--nproc", "2", "train.py", "--stand", "--nproc", "5", "--lr=1", "--standalone=1"});
  EXPECT_EQ(config.training_script, "train.py");
  EXPECT_EQ(config.training_script_args,
            (std::vector<std::string>{"--stand", "--nproc", "5", "--lr=1", "--standalone=1"}));
  EXPECT_FALSE(config.standalone);
  EXPECT_EQ(config.nproc_per_node.count, 2);
}

// An option's value is not an option and not the script, whatever it
// looks like; "--" ends ddprun's options.
TEST(CliAbbreviations, ValuesThatLookLikeOptionsAndDoubleDashAreLeftAlone) {
  const auto config = parse({"--nnodes", "2", "--rdzv-id", "--stand", "--log-line-prefix-template",
                             "--nproc", "t.py", "--max_res", "3"});
  EXPECT_EQ(config.rdzv_id, "--stand");
  EXPECT_EQ(config.log_line_prefix_template, "--nproc");
  EXPECT_FALSE(config.standalone);
  EXPECT_EQ(config.training_script, "t.py");
  EXPECT_EQ(config.training_script_args, (std::vector<std::string>{"--max_res", "3"}));

  const auto after_dashes = parse({"--nnodes", "2", "--", "t.py", "--stand"});
  EXPECT_EQ(after_dashes.training_script, "t.py");
  EXPECT_EQ(after_dashes.training_script_args, (std::vector<std::string>{"--stand"}));
  EXPECT_FALSE(after_dashes.standalone);
}

// CLI11 is told only of the options the arguments name (cli.cpp): one named
// as another's value, short flags run together and an option given twice
// read as they did when every option was registered.
TEST(CliAbbreviations, OptionsReadTheSameWhicheverOthersAreNamed) {
  const auto value = parse({"--nnodes", "2", "--rdzv-id", "--standalone", "t.py"});
  EXPECT_EQ(value.rdzv_id, "--standalone");
  EXPECT_FALSE(value.standalone);

  const auto together = parse({"-mt", "3", "pkg.train"});
  EXPECT_TRUE(together.module);
  EXPECT_EQ(together.tee.forLocalRank(0), Std::kAll);

  EXPECT_EQ(parse({"--max_restarts", "3", "--max-restarts", "4", "t.py"}).max_restarts, 4);

  // The abbreviation pass stops at "3" (it takes it for the script) and
  // leaves "--max-restarts=2" whole; CLI11 reads on, and finds it.
  const auto read_on = parse({"-mt", "3", "--max-restarts=2", "pkg.train"});
  EXPECT_EQ(read_on.max_restarts, 2);
  EXPECT_EQ(read_on.training_script, "pkg.train");
  EXPECT_EQ(parse({"t.py"}, {{"PET_MAX_RESTARTS", "5"}}).max_restarts, 5);
}

// argparse reads "-mt 3" as -m -t 3: the pass takes "3" for -t's value, not
// for the script, and goes on expanding what follows.
TEST(CliAbbreviations, ShortFlagsRunTogetherDoNotEndTheOptions) {
  const auto spaced = parse({"-mt", "3", "--nproc", "2", "pkg.train"});
  EXPECT_TRUE(spaced.module);
  EXPECT_EQ(spaced.tee.forLocalRank(0), Std::kAll);
  EXPECT_EQ(spaced.nproc_per_node.count, 2);
  EXPECT_EQ(spaced.training_script, "pkg.train");

  const auto attached = parse({"-mt3", "--max_res", "1", "pkg.train"});
  EXPECT_TRUE(attached.module);
  EXPECT_EQ(attached.tee.forLocalRank(0), Std::kAll);
  EXPECT_EQ(attached.max_restarts, 1);
}

}  // namespace
}  // namespace ddprun::launcher

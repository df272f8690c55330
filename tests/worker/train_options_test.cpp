// train's flags: the seeds' spellings, positionals, defaults, one-line errors.
#include "ddprun/worker/train_options.hpp"

#include <gtest/gtest.h>

#include "ddprun/proto/errors.hpp"

namespace ddprun::worker {
namespace {

TrainOptions parse(std::vector<std::string> args) {
  auto options = parseTrainOptions(args);
  if (!options) {
    throw std::logic_error("--help");
  }
  return *options;
}

std::string parseError(std::vector<std::string> args) {
  try {
    parseTrainOptions(args);
  } catch (const ConfigError& error) {
    return error.what();
  }
  return "<no error>";
}

TEST(TrainOptionsTest, DefaultsMatchTheTutorials) {
  const TrainOptions options = parse({});
  EXPECT_EQ(options.task, "mlp");
  EXPECT_EQ(options.batch_size, 32);
  EXPECT_EQ(options.snapshot_path, "snapshot.pt");
  EXPECT_FALSE(options.ignore_snapshot);
  EXPECT_FALSE(options.fault.at_epoch.has_value());
}

TEST(TrainOptionsTest, AcceptsDashAndUnderscoreSpellings) {
  const TrainOptions dashes = parse({"--total-epochs", "50", "--save-every", "10", "--batch-size",
                                     "16", "--snapshot-path", "a.pt"});
  const TrainOptions underscores = parse({"--total_epochs", "50", "--save_every", "10",
                                          "--batch_size", "16", "--snapshot_path", "a.pt"});
  for (const TrainOptions& options : {dashes, underscores}) {
    EXPECT_EQ(options.total_epochs, 50);
    EXPECT_EQ(options.save_every, 10);
    EXPECT_EQ(options.batch_size, 16);
    EXPECT_EQ(options.snapshot_path, "a.pt");
  }
}

TEST(TrainOptionsTest, AcceptsTheTutorialPositionals) {
  const TrainOptions options = parse({"50", "10", "--batch_size", "32"});
  EXPECT_EQ(options.total_epochs, 50);
  EXPECT_EQ(options.save_every, 10);
}

TEST(TrainOptionsTest, ParsesTaskOptimiserAndFaultFlags) {
  const TrainOptions options =
      parse({"--task", "fmnist", "--lr", "0.5", "--seed", "9", "--samples", "600",
             "--fail-at-epoch", "3", "--fail-rank", "2", "--fail-mode", "kill", "--ignore-snapshot",
             "--threads", "1", "--fail-exit-code", "3"});
  EXPECT_EQ(options.task, "fmnist");
  EXPECT_DOUBLE_EQ(*options.lr, 0.5);
  EXPECT_EQ(options.seed, 9u);
  EXPECT_EQ(options.samples, 600);
  EXPECT_EQ(*options.fault.at_epoch, 3);
  EXPECT_EQ(options.fault.rank, 2);
  EXPECT_EQ(options.fault.mode, FailMode::kKill);
  EXPECT_EQ(options.fault.exit_code, 3);
  EXPECT_EQ(parse({}).fault.exit_code, 1);
  EXPECT_TRUE(options.ignore_snapshot);
  EXPECT_EQ(options.threads, 1);
}

TEST(TrainOptionsTest, BadValuesAreOneLineErrorsNamingTheFlag) {
  for (const auto& [args, flag] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"--task", "gpt"}, "--task"},
           {{"--batch-size", "0"}, "--batch-size"},
           {{"--total-epochs", "ten"}, "--total-epochs"},
           {{"--fail-mode", "explode"}, "--fail-mode"},
           {{"--fail-exit-code", "0"}, "--fail-exit-code"},
           {{"--fail-exit-code", "256"}, "--fail-exit-code"},
           {{"--no-such-flag"}, "--no-such-flag"},
       }) {
    const std::string error = parseError(args);
    EXPECT_NE(error.find(flag), std::string::npos) << error;
    EXPECT_EQ(error.find('\n'), std::string::npos) << error;
  }
}

// "--data-dir=" is "" as in argparse, never the next argument: CLI11 alone
// took "10" for the data directory and "5" for total_epochs. "" names no
// directory, file or number, so it is refused naming the flag.
TEST(TrainOptionsTest, AnEmptyValueIsRefusedNamingItsFlagNotTheNextArgument) {
  for (const auto& [args, flag] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"--data-dir=", "10", "5"}, "--data-dir"},
           {{"--snapshot_path=", "--save-every", "3"}, "--snapshot_path"},
           {{"--inspect-snapshot", ""}, "--inspect-snapshot"},
           {{"--seed=", "--task", "mlp"}, "--seed"},
       }) {
    EXPECT_EQ(parseError(args), "bad command line: " + flag +
                                    ": empty value (an unset variable?); give a value or leave "
                                    "it out (see train --help)");
  }
  EXPECT_EQ(parse({"--data-dir=d", "10", "5"}).data_dir, "d");
  EXPECT_FALSE(parse({"--ignore-snapshot=false"}).ignore_snapshot) << "a flag keeps its value";
}

}  // namespace
}  // namespace ddprun::worker

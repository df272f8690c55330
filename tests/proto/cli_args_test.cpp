// proto::readAsArgparse, argparse's reading of an attached value for a
// CLI11 command line: each case parsed by CLI11 itself, as the programs do.
#include "ddprun/proto/cli_args.hpp"

#include <gtest/gtest.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <string>
#include <vector>

namespace ddprun::proto {
namespace {

// A command line with each kind of option: text, a number, a flag, a short
// spelling, positionals.
struct Parsed {
  std::string out = "unset";
  std::string host = "unset";
  int port = -1;
  bool json = false;
  std::vector<std::string> inputs;
};

class CliArgsTest : public ::testing::Test {
 protected:
  CliArgsTest() {
    app_.add_option("-o,--out", parsed_.out);
    host_ = app_.add_option("--host", parsed_.host);
    app_.add_option("--port", parsed_.port);
    app_.add_flag("--json", parsed_.json);
    app_.add_option("inputs", parsed_.inputs);
  }

  // Parses `args` through readAsArgparse, --host allowed to be empty.
  Parsed parse(const std::vector<std::string>& args) {
    std::vector<std::string> read = readAsArgparse(app_, args, {host_});
    std::reverse(read.begin(), read.end());  // CLI11's vector overload expects reversed order
    app_.parse(read);
    return parsed_;
  }

  // The one line readAsArgparse or CLI11 refuses `args` with.
  std::string refusal(const std::vector<std::string>& args) {
    try {
      parse(args);
    } catch (const CLI::ParseError& error) {
      return error.what();
    }
    return "<accepted>";
  }

  CLI::App app_{"cli_args_test"};
  CLI::Option* host_ = nullptr;
  Parsed parsed_;
};

TEST_F(CliArgsTest, AnEmptyAttachedValueIsTheEmptyStringNeverTheNextArgument) {
  const Parsed parsed = parse({"--host=", "--port", "3"});
  EXPECT_EQ(parsed.host, "");
  EXPECT_EQ(parsed.port, 3);
  EXPECT_TRUE(parsed.inputs.empty());
}

TEST_F(CliArgsTest, AnEmptyValueIsRefusedNamingTheOptionUnlessItMayBeEmpty) {
  EXPECT_EQ(refusal({"--out=", "--port", "3"}),
            "--out: empty value (an unset variable?); give a value or leave it out");
  EXPECT_EQ(refusal({"a", "--out", ""}),
            "--out: empty value (an unset variable?); give a value or leave it out");
  EXPECT_EQ(refusal({"-o="}).rfind("-o: empty value", 0), 0u);
  EXPECT_EQ(refusal({"--port="}).rfind("--port: empty value", 0), 0u) << "CLI11 would read 0";
  EXPECT_EQ(parse({"--host", ""}).host, "");
}

TEST_F(CliArgsTest, AttachedValuesAreReadAsArgparseReadsThem) {
  const Parsed parsed = parse({"in1", "--out=a=b", "--port=7", "in2"});
  EXPECT_EQ(parsed.out, "a=b");
  EXPECT_EQ(parsed.port, 7);
  EXPECT_EQ(parsed.inputs, (std::vector<std::string>{"in1", "in2"}));
  EXPECT_EQ(parse({"-o=x"}).out, "x") << "CLI11 alone reads \"=x\"";
  EXPECT_EQ(parse({"-ox"}).out, "x");
}

// CLI11 takes the argument after an option as its value, whatever it looks
// like: so does the walk, which then goes on after it.
TEST_F(CliArgsTest, TheArgumentAfterAValueOptionIsItsValue) {
  const Parsed parsed = parse({"--out", "--port=", "--host=", "x"});
  EXPECT_EQ(parsed.out, "--port=");
  EXPECT_EQ(parsed.host, "");
  EXPECT_EQ(parsed.inputs, (std::vector<std::string>{"x"}));
}

TEST_F(CliArgsTest, FlagsUnknownOptionsAndWhatFollowsDoubleDashAreLeftToCli11) {
  EXPECT_FALSE(parse({"--json=false"}).json);
  EXPECT_NE(refusal({"--bogus=", "x"}).find("--bogus"), std::string::npos);
  const Parsed parsed = parse({"--port", "1", "--", "--out=", "--host="});
  EXPECT_EQ(parsed.out, "unset");
  EXPECT_EQ(parsed.inputs, (std::vector<std::string>{"--out=", "--host="}));
}

TEST(SplitAttachedValue, LongAndShortOptionsWithAnEqualsSign) {
  const auto name_and_value = [](const std::string& arg) {
    const auto attached = splitAttachedValue(arg);
    return attached ? attached->name + "|" + attached->value : std::string("none");
  };
  EXPECT_EQ(name_and_value("--name=value"), "--name|value");
  EXPECT_EQ(name_and_value("--name="), "--name|");
  EXPECT_EQ(name_and_value("--name=a=b"), "--name|a=b");
  EXPECT_EQ(name_and_value("--=x"), "--|x");
  EXPECT_EQ(name_and_value("-n=3"), "-n|3");
  EXPECT_EQ(name_and_value("-n="), "-n|");
  EXPECT_EQ(name_and_value("--name"), "none");
  EXPECT_EQ(name_and_value("-n3=4"), "none");
  EXPECT_EQ(name_and_value("key=value"), "none");
  EXPECT_EQ(name_and_value("-"), "none");
}

}  // namespace
}  // namespace ddprun::proto

// The man pages help2man writes at build time from each program's own --help
// (packaging/CMakeLists.txt): every option --help lists is a term of its own
// in the page, with its description, so a page documents exactly the flags
// its program takes; the sections --help cannot say, written by hand (exit
// status, environment, files), are there too.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "ddprun/launcher/process/subprocess.hpp"
#include "ddprun/test_support/command.hpp"
#include "ddprun/test_support/text.hpp"
#include "ddprun/version.hpp"

namespace ddprun {
namespace {

using test_support::contains;

struct Program {
  std::string name;
  std::string binary;
};

std::vector<Program> programs() {
  return {
      {"ddprun", DDPRUN_BINARY},
      {"ddprund", DDPRUND_BINARY},
#ifdef TRAIN_BINARY
      {"train", TRAIN_BINARY},
#endif
  };
}

std::string output(const std::vector<std::string>& argv) {
  const auto result = test_support::runCommand(argv, {launcher::inheritedEnvironment()});
  EXPECT_EQ(result.code, 0) << argv.front() << ": " << result.errors;
  return result.output;
}

// The page's roff source, as man reads it.
std::string manSource(const std::string& program) {
  return output({"gzip", "-dc", std::string(DDPRUN_MAN_DIR) + "/" + program + ".1.gz"});
}

// The first name of every option --help lists ("-m, --module ..." gives
// "-m", CLI11's "-h,--help ..." gives "-h").
std::vector<std::string> optionNames(const std::string& help) {
  std::vector<std::string> names;
  std::istringstream lines(help);
  for (std::string line; std::getline(lines, line);) {
    if (line.starts_with("  -")) {
      const std::string first = line.substr(2, line.find_first_of(" ,", 2) - 2);
      names.push_back(first);
    }
  }
  return names;
}

// The line after each line that is `marker`.
std::vector<std::string> linesAfter(const std::string& text, const std::string& marker) {
  std::vector<std::string> found;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line == marker && std::getline(lines, line)) {
      found.push_back(line);
    }
  }
  return found;
}

// How help2man writes an option's name: bold, its dashes escaped.
std::string roffBold(const std::string& name) {
  std::string escaped;
  for (const char c : name) {
    escaped += c == '-' ? std::string("\\-") : std::string(1, c);
  }
  return "\\fB" + escaped + "\\fR";
}

TEST(ManPages, EveryOptionOfHelpIsATermOfItsOwnWithItsDescription) {
  for (const Program& program : programs()) {
    const std::string page = manSource(program.name);
    const auto names = optionNames(output({program.binary, "--help"}));
    EXPECT_GE(names.size(), 5u) << program.name;
    for (const std::string& name : names) {
      EXPECT_TRUE(contains(page, "\n.TP\n" + roffBold(name))) << program.name << " " << name;
    }
    // help2man's paragraph for an option it found no description of, or
    // could not tell from its description.
    EXPECT_EQ(linesAfter(page, ".HP"), std::vector<std::string>{}) << program.name;
  }
}

TEST(ManPages, HaveTheSynopsisVersionAndTheHandWrittenSections) {
  for (const Program& program : programs()) {
    const std::string page = manSource(program.name);
    EXPECT_TRUE(contains(page, "\n.SH SYNOPSIS\n.B " + program.name + "\n")) << page;
    EXPECT_TRUE(contains(page, " " + std::string(kVersion) + "\" \"User Commands\"")) << page;
    for (const std::string section : {"\"EXIT STATUS\"", "ENVIRONMENT", "FILES", "\"SEE ALSO\""}) {
      EXPECT_TRUE(contains(page, "\n.SH " + section + "\n")) << program.name << " " << section;
    }
  }
}

}  // namespace
}  // namespace ddprun

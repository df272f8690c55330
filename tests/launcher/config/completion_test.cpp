// --print-completion's scripts, run in the real shells: bash's completion
// function called as bash calls it (COMP_WORDS/COMP_CWORD), and zsh's
// through its completion system in a pseudo-terminal (zpty), logging what
// compadd would offer (zsh_complete.zsh); tcsh's as tcsh registers it.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "ddprun/launcher/config/cli.hpp"
#include "ddprun/launcher/process/subprocess.hpp"
#include "ddprun/test_support/files.hpp"
#include "ddprun/test_support/temp_dir.hpp"
#include "launcher_test_util.hpp"

namespace ddprun::launcher {
namespace {

using Words = std::set<std::string>;

class CompletionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::ofstream(dir_ / "train.py") << "print('hi')\n";
    std::ofstream(dir_ / "data.txt") << "x\n";
    std::filesystem::create_directory(dir_ / "logs");
  }

  // Runs argv with stdout to a file; returns its lines as a set.
  Words run(std::vector<std::string> argv) {
    SpawnOptions options;
    options.argv = std::move(argv);
    options.env = {{"PATH", "/usr/bin:/bin"}, {"HOME", dir_.path().string()}};
    const std::string out_path = (dir_ / "out").string();
    const int out = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    options.stdout_fd = out;
    Subprocess child(options);
    ::close(out);
    const ExitStatus status = child.wait();
    EXPECT_TRUE(status.success()) << options.argv.front() << " " << status.describe();
    Words words;
    std::istringstream lines(test_support::readFile(out_path));
    for (std::string line; std::getline(lines, line);) {
      words.insert(line);
    }
    return words;
  }

  std::string saveScript(const std::string& shell) {
    const auto path = scripts_ / ("ddprun." + shell);
    std::ofstream(path) << completionScript(shell);
    return path.string();
  }

  // What bash's _ddprun offers for `words`, the last being the one under the cursor.
  Words bashOffers(std::vector<std::string> words) {
    std::vector<std::string> argv = {"bash",
                                     "--norc",
                                     "--noprofile",
                                     "-c",
                                     R"(cd "$1" && source "$2" && shift 2 && COMP_WORDS=("$@") &&
           COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 )) && _ddprun && printf '%s\n' "${COMPREPLY[@]}")",
                                     "bash",
                                     dir_.path().string(),
                                     saveScript("bash")};
    argv.insert(argv.end(), words.begin(), words.end());
    Words offered = run(argv);
    offered.erase("");
    return offered;
  }

  // What zsh's completion offers after typing `line` and TAB.
  Words zshOffers(const std::string& line) {
    return run({"zsh", "-f", DDPRUN_ZSH_COMPLETE, dir_.path().string(), saveScript("zsh"), line});
  }

  test_support::TempDir dir_;      // the working directory, with files to complete
  test_support::TempDir scripts_;  // the completion scripts, out of the way
};

TEST_F(CompletionTest, BashCompletesOptionsInBothSpellingsAndFixedValues) {
  EXPECT_EQ(bashOffers({"ddprun", "--nproc"}), (Words{"--nproc-per-node", "--nproc_per_node"}));
  EXPECT_EQ(bashOffers({"ddprun", "--rdzv-backend", ""}),
            (Words{"static", "c10d", "etcd-v3", "etcd", "etcd-v2"}));
  EXPECT_EQ(bashOffers({"ddprun", "--rdzv_backend", "=", "c"}), (Words{"c10d"}))
      << "--rdzv_backend=c, which bash splits at '='";
  EXPECT_EQ(bashOffers({"ddprun", "--nproc-per-node", "a"}), (Words{"auto"}));
  EXPECT_EQ(bashOffers({"ddprun", "--start_method", "f"}), (Words{"fork", "forkserver"}));
  EXPECT_EQ(bashOffers({"ddprun", "--numa-binding", ""}),
            (Words{"node", "socket", "exclusive", "core-complex"}));
  EXPECT_EQ(bashOffers({"ddprun", "--print-completion", ""}), (Words{"bash", "tcsh", "zsh"}));
  EXPECT_EQ(bashOffers({"ddprun", "--log-dir", ""}), (Words{"logs"}));
  EXPECT_EQ(bashOffers({"ddprun", "--rdzv-id", ""}), Words{}) << "free text: nothing to offer";
}

TEST_F(CompletionTest, BashCompletesTheScriptAndThenOnlyItsFiles) {
  EXPECT_EQ(bashOffers({"ddprun", "--standalone", "tr"}), (Words{"train.py"}));
  EXPECT_EQ(bashOffers({"ddprun", "--nproc", "2", "t"}), (Words{"train.py"}))
      << "an abbreviated option's value is not the script";
  EXPECT_EQ(bashOffers({"ddprun", "--rdzv-id", "--x", "--nproc=2", "t"}), (Words{"train.py"}));
  EXPECT_EQ(bashOffers({"ddprun", "train.py", "--st"}), Words{})
      << "the script's arguments are not ddprun's options";
  EXPECT_EQ(bashOffers({"ddprun", "train.py", "d"}), (Words{"data.txt"}));
}

TEST_F(CompletionTest, ZshScriptIsValidZsh) {
  run({"zsh", "-n", saveScript("zsh")});  // exits non-zero on a syntax error
}

// tcsh loads the script (a bad pattern is an error there) and keeps each
// option's values: `complete ddprun` lists what it registered.
TEST_F(CompletionTest, TcshLoadsTheScriptWithEachOptionsValues) {
  const Words listed =
      run({"tcsh", "-f", "-c", "eval \"`cat " + saveScript("tcsh") + "`\"; complete ddprun"});
  std::string text;
  for (const std::string& line : listed) {
    text += line + "\n";
  }
  for (const char* pattern :
       {"n/--nproc-per-node/(auto cpu gpu)/", "c/--nproc_per_node=/(auto cpu gpu)/",
        "n/--log-dir/d/", "n/-r/(0 1 2 3)/", "n/--rdzv-id/n/", "p/*/f/"}) {
    EXPECT_NE(text.find(pattern), std::string::npos) << pattern << " in:\n" << text;
  }
  EXPECT_NE(text.find("nproc-per-node nproc_per_node"), std::string::npos) << text;
  EXPECT_EQ(text.find("xpu"), std::string::npos) << text;
}

TEST_F(CompletionTest, ZshCompletesOptionsValuesAndTheScript) {
  const Words nproc = zshOffers("ddprun --nproc");
  EXPECT_TRUE(nproc.contains("--nproc-per-node") && nproc.contains("--nproc_per_node"));
  EXPECT_FALSE(nproc.contains("--nnodes"));
  EXPECT_EQ(zshOffers("ddprun --rdzv-backend "),
            (Words{"static", "c10d", "etcd-v3", "etcd", "etcd-v2"}));
  EXPECT_EQ(zshOffers("ddprun --rdzv_backend=c"), (Words{"c10d"}));
  EXPECT_EQ(zshOffers("ddprun --print-completion "), (Words{"bash", "tcsh", "zsh"}));
  EXPECT_TRUE(zshOffers("ddprun --standalone tr").contains("train.py"));
  EXPECT_EQ(zshOffers("ddprun --standalone train.py --st"), Words{});
  EXPECT_TRUE(zshOffers("ddprun train.py d").contains("data.txt"));
}

TEST(Completion, OnlyBashAndZsh) {
  EXPECT_THROW(completionScript("fish"), ConfigError);
  EXPECT_EQ(testing::parse({"--print-completion", "bash"}).print_completion, "bash");
}

}  // namespace
}  // namespace ddprun::launcher

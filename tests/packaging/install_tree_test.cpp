// `cmake --install` from this build into a prefix of the test's own, as a
// user installs from source: every file lands in GNUInstallDirs' usual place
// under the prefix; the unit names ddprund where it was installed and passes
// `systemd-analyze verify`; the completion files are what the installed
// ddprun's --print-completion prints; the launcher's component needs no
// LibTorch, and its ddprun finds its etcd TLS module where it was installed.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <regex>
#include <string>
#include <vector>

#include "ddprun/launcher/process/subprocess.hpp"
#include "ddprun/test_support/command.hpp"
#include "ddprun/test_support/files.hpp"
#include "ddprun/test_support/temp_dir.hpp"
#include "ddprun/test_support/text.hpp"

namespace ddprun {
namespace {

namespace fs = std::filesystem;
using test_support::contains;

test_support::CommandResult run(const std::vector<std::string>& argv,
                                test_support::Environment env = launcher::inheritedEnvironment()) {
  return test_support::runCommand(argv, {std::move(env), std::chrono::seconds(60)});
}

bool executable(const fs::path& path) {
  struct stat info {};
  return ::stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode) && (info.st_mode & S_IXUSR);
}

// Installs the build's components (every one when none is named) under a
// fresh prefix.
class InstallTree : public ::testing::Test {
 protected:
  void install(const std::string& component = "") {
    std::vector<std::string> argv = {DDPRUN_CMAKE, "--install", DDPRUN_BUILD_DIR, "--prefix",
                                     prefix_.path().string()};
    if (!component.empty()) {
      argv.insert(argv.end(), {"--component", component});
    }
    const auto result = run(argv);
    ASSERT_EQ(result.code, 0) << result.output << result.errors;
  }
  fs::path at(const std::string& relative) const { return prefix_ / relative; }

  test_support::TempDir prefix_{"ddprun-install-tree"};
};

TEST_F(InstallTree, PutsEveryFileInTheUsualPlaceUnderThePrefix) {
  install();
  std::vector<std::string> programs = {"bin/ddprun", "bin/ddprund",
                                       "share/ddprun/slurm/train.sbatch"};
  std::vector<std::string> files = {
      "share/man/man1/ddprun.1.gz",
      "share/man/man1/ddprund.1.gz",
      "share/bash-completion/completions/ddprun",
      "share/zsh/vendor-completions/_ddprun",
      "lib/systemd/system/ddprund.service",
      "share/ddprun/slurm/README.md",
      std::string(DDPRUN_INSTALL_LIBDIR) + "/ddprun/ddprun-etcd-tls.so",
  };
#ifdef TRAIN_BINARY
  programs.push_back("bin/train");
  files.push_back("share/man/man1/train.1.gz");
#endif
  for (const std::string& program : programs) {
    EXPECT_TRUE(executable(at(program))) << program;
  }
  for (const std::string& file : files) {
    EXPECT_TRUE(fs::is_regular_file(at(file))) << file;
  }
  // man finds the pages where the prefix keeps them.
  auto env = launcher::inheritedEnvironment();
  env.emplace_back("MANPATH", at("share/man").string());
  const auto found = run({"man", "-w", "ddprun"}, env);
  EXPECT_EQ(found.output, at("share/man/man1/ddprun.1.gz").string() + "\n") << found.errors;
}

TEST_F(InstallTree, TheUnitRunsTheInstalledDaemonAndPassesSystemdAnalyzeVerify) {
  install("ddprun");
  const fs::path unit = at("lib/systemd/system/ddprund.service");
  const std::string text = test_support::readFile(unit);
  EXPECT_TRUE(contains(text, "\nExecStart=" + at("bin/ddprund").string() + " --port 29400\n"))
      << text;
  EXPECT_TRUE(contains(text, "\nDynamicUser=yes\n")) << text;
  EXPECT_FALSE(std::regex_search(text, std::regex("@[A-Z_]+@")))
      << "a template variable left in the unit:\n"
      << text;
  // It also checks that ExecStart names an executable; a warning (an unknown
  // key, a bad value) fails the test too.
  const auto verify = run({"systemd-analyze", "verify", unit.string()});
  EXPECT_EQ(verify.code, 0) << verify.errors;
  EXPECT_EQ(verify.output + verify.errors, "");
}

TEST_F(InstallTree, TheCompletionFilesAreWhatTheInstalledDdprunPrints) {
  install("ddprun");
  for (const auto& [shell, file] :
       {std::pair<std::string, std::string>{"bash", "share/bash-completion/completions/ddprun"},
        {"zsh", "share/zsh/vendor-completions/_ddprun"}}) {
    const auto printed = run({at("bin/ddprun").string(), "--print-completion", shell});
    ASSERT_EQ(printed.code, 0) << printed.errors;
    EXPECT_EQ(test_support::readFile(at(file)), printed.output) << file;
  }
  // bash-completion sources the file when ddprun is first completed.
  const auto loaded = run(
      {"bash", "--norc", "-c",
       ". " + at("share/bash-completion/completions/ddprun").string() + " && complete -p ddprun"});
  EXPECT_TRUE(contains(loaded.output, " -F _ddprun ddprun\n")) << loaded.output << loaded.errors;
}

TEST_F(InstallTree, TheLauncherComponentIsWithoutTrainAndNeedsNoLibTorch) {
  install("ddprun");
  EXPECT_FALSE(fs::exists(at("bin/train")));
  EXPECT_FALSE(fs::exists(at("share/man/man1/train.1.gz")));
  for (const std::string program : {"bin/ddprun", "bin/ddprund"}) {
    const auto libraries = run({"ldd", at(program).string()});
    ASSERT_EQ(libraries.code, 0) << libraries.errors;
    EXPECT_TRUE(contains(libraries.output, "libc.so")) << libraries.output;
    EXPECT_FALSE(contains(libraries.output, "libtorch")) << program << ":\n" << libraries.output;
    EXPECT_FALSE(contains(libraries.output, "libc10")) << program << ":\n" << libraries.output;
  }
  // etcd over TLS: the installed ddprun loads its module and gets as far as
  // the (absent) etcd, which refuses the connection. Its logs (no --log-dir:
  // under $TMPDIR) go in the test's directory.
  auto env = launcher::inheritedEnvironment();
  std::erase_if(env, [](const auto& variable) { return variable.first == "TMPDIR"; });
  env.emplace_back("TMPDIR", prefix_.path().string());
  const auto tls = run(
      {at("bin/ddprun").string(), "--nnodes", "2", "--rdzv-backend", "etcd-v3", "--rdzv-endpoint",
       "127.0.0.1:1", "--rdzv-conf", "protocol=https,join_timeout=1", "--no-python", "true"},
      env);
  EXPECT_NE(tls.code, 0) << tls.errors;
  EXPECT_TRUE(contains(tls.errors, "127.0.0.1:1: connection refused")) << tls.errors;
  EXPECT_FALSE(contains(tls.errors, "TLS module")) << tls.errors;
}

}  // namespace
}  // namespace ddprun

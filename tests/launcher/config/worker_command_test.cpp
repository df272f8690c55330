// Worker argv building (docs/torchrun-contract.md §4): -u, -m, --no-python, --run-path,
// ${local_rank} expansion and ddprun's direct-executable rule.
#include "ddprun/launcher/config/worker_command.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "ddprun/test_support/temp_dir.hpp"
#include "launcher_test_util.hpp"

namespace ddprun::launcher {
namespace {

namespace fs = std::filesystem;
using Args = std::vector<std::string>;
using testing::parse;

using test_support::TempDir;

// Writes `content` to `name` in `dir`, executable or not; returns its path.
std::string writeFile(const TempDir& dir, const std::string& name, const std::string& content,
                      bool executable) {
  const auto file = dir / name;
  std::ofstream(file, std::ios::binary) << content;
  fs::permissions(
      file, executable ? fs::perms::owner_all : fs::perms::owner_read | fs::perms::owner_write);
  return file.string();
}

const Environment kEnv = mapEnvironment({});
const std::string kPython = "/opt/py/bin/python";

TEST(LocalRankMacro, SafeSubstituteSemantics) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"${local_rank}", "3"},
      {"$local_rank", "3"},
      {"--dev=cuda:${local_rank}", "--dev=cuda:3"},
      {"$local_rank.log", "3.log"},
      {"$$local_rank", "$local_rank"},
      {"$${local_rank}", "${local_rank}"},
      {"$$$local_rank", "$3"},
      {"$local_ranks", "$local_ranks"},
      {"$LOCAL_RANK", "$LOCAL_RANK"},
      {"${rank}", "${rank}"},
      {"${local_rank", "${local_rank"},
      {"${ local_rank}", "${ local_rank}"},
      {"$", "$"},
      {"a$", "a$"},
      {"$1", "$1"},
      {"${}", "${}"},
      {"cost: $5 ${local_rank}$local_rank", "cost: $5 33"},
  };
  for (const auto& [in, out] : cases) {
    EXPECT_EQ(expandLocalRank(in, 3), out) << in;
  }
}

TEST(WorkerCommand, DefaultRunsPythonUnbuffered) {
  const auto config = parse({"train.py", "--rank", "${local_rank}", "$HOME"});
  EXPECT_EQ(workerCommand(config, 2, kEnv, kPython),
            (Args{"/opt/py/bin/python", "-u", "train.py", "--rank", "2", "$HOME"}));
}

TEST(WorkerCommand, ModuleAddsDashM) {
  const auto config = parse({"-m", "pkg.train", "x"});
  EXPECT_EQ(workerCommand(config, 0, kEnv, kPython),
            (Args{"/opt/py/bin/python", "-u", "-m", "pkg.train", "x"}));
}

TEST(WorkerCommand, NoPythonExecsTheScriptAndExpandsOnlyItsArguments) {
  const auto config = parse({"--no-python", "/bin/${local_rank}", "${local_rank}"});
  EXPECT_EQ(workerCommand(config, 5, kEnv, kPython), (Args{"/bin/${local_rank}", "5"}));
}

TEST(WorkerCommand, RunPathUsesARunpyBootstrap) {
  const auto config = parse({"--run-path", "--no-python", "/abs/t.py", "a"});
  const auto argv = workerCommand(config, 0, kEnv, kPython);
  ASSERT_EQ(argv.size(), 6u);
  EXPECT_EQ(argv[0], "/opt/py/bin/python");
  EXPECT_EQ(argv[2], "-c");
  EXPECT_NE(argv[3].find("runpy.run_path(sys.argv[0], run_name='__main__')"), std::string::npos);
  EXPECT_EQ(argv[4], "/abs/t.py");
  EXPECT_EQ(argv[5], "a");
}

// Which Python runs is chosen once per agent (python_interpreter.hpp); a
// Python worker without one is a caller's bug, never a guess.
TEST(WorkerCommand, APythonWorkerNeedsTheChosenInterpreter) {
  EXPECT_TRUE(runsUnderPython(parse({"t.py"}), kEnv));
  EXPECT_TRUE(runsUnderPython(parse({"--run-path", "--no-python", "/abs/t.py"}), kEnv));
  EXPECT_FALSE(runsUnderPython(parse({"--no-python", "t.py"}), kEnv));
  EXPECT_THROW(workerCommand(parse({"t.py"}), 0, kEnv, ""), std::logic_error);
  EXPECT_EQ(workerCommand(parse({"--no-python", "/bin/true"}), 0, kEnv, ""), (Args{"/bin/true"}));
}

TEST(DirectExecutable, Rule) {
  const TempDir dir{"ddprun-wc"};
  EXPECT_TRUE(isDirectExecutable(writeFile(dir, "run.sh", "#!/bin/bash\necho hi\n", true)));
  EXPECT_TRUE(isDirectExecutable(writeFile(dir, "bin",
                                           std::string("\x7f"
                                                       "ELF\x02\x01",
                                                       6),
                                           true)));
  EXPECT_FALSE(isDirectExecutable(writeFile(dir, "py", "#!/usr/bin/env python3\n", true)));
  EXPECT_FALSE(isDirectExecutable(writeFile(dir, "t.py", "#!/bin/sh\n", true)));
  EXPECT_FALSE(isDirectExecutable(writeFile(dir, "plain", "print(1)\n", true)));
  EXPECT_FALSE(isDirectExecutable(writeFile(dir, "noexec.sh", "#!/bin/sh\n", false)));
  EXPECT_FALSE(isDirectExecutable(dir.path().string()));
  EXPECT_FALSE(isDirectExecutable(dir.path().string() + "/missing"));
}

// `ddprun ... train` with train installed on PATH runs it, as a shell
// would; a Python script found on PATH still goes to Python.
TEST(DirectExecutable, ABareNameOnPathRunsDirectly) {
  const TempDir dir{"ddprun-wc"};
  const auto program = writeFile(dir, "mytrain", "#!/bin/sh\nexit 0\n", true);
  writeFile(dir, "mytool", "#!/usr/bin/env python3\n", true);
  const auto env = mapEnvironment({{"PATH", "/nonexistent:" + dir.path().string()}});
  EXPECT_EQ(workerCommand(parse({"mytrain", "--epochs", "2"}), 0, env, kPython),
            (Args{program, "--epochs", "2"}));
  EXPECT_EQ(workerCommand(parse({"mytool"}), 0, env, kPython),
            (Args{"/opt/py/bin/python", "-u", "mytool"}));
  EXPECT_EQ(workerCommand(parse({"-m", "mytrain"}), 0, env, kPython)[0], "/opt/py/bin/python");
}

TEST(DirectExecutable, ShellScriptRunsWithoutPython) {
  const TempDir dir{"ddprun-wc"};
  const auto script = writeFile(dir, "job.sh", "#!/bin/sh\nexit 0\n", true);
  const auto config = parse({script, "${local_rank}"});
  EXPECT_EQ(workerCommand(config, 1, kEnv, kPython), (Args{script, "1"}));
  // With -m the name is a module, never a file to exec.
  const auto module = parse({"-m", script});
  EXPECT_EQ(workerCommand(module, 1, kEnv, kPython)[0], "/opt/py/bin/python");
}

}  // namespace
}  // namespace ddprun::launcher

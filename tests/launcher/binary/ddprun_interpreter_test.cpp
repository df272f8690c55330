// Which Python the ddprun executable runs script workers with
// (docs/torchrun-contract.md §4): $PYTHON_EXEC, else the active virtual
// environment or conda prefix, else the first python3 on PATH that finds
// torch; one clear line when none does. Each "python3" here is a real
// interpreter: DDPRUN_TORCH_PYTHON (which has torch) behind a symlink, or a
// shim that runs it without its site packages (so without torch) and notes
// every call.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "ddprun/launcher/process/subprocess.hpp"
#include "ddprun/test_support/files.hpp"
#include "ddprun_binary_fixture.hpp"

namespace ddprun::launcher {
namespace {

namespace fs = std::filesystem;
using test_support::readFile;
using testing::contains;
using testing::countOf;
using testing::DdprunBinaryTest;
using testing::Outcome;

class DdprunInterpreterTest : public DdprunBinaryTest {
 protected:
  void SetUp() override {
    if (std::string(DDPRUN_TORCH_PYTHON).empty()) {
      GTEST_SKIP() << "no Python with torch on this machine";
    }
    script_ = (dir_.path() / "who.py").string();
    std::ofstream(script_) << "import sys\nprint(sys.executable)\n";
  }

  // <dir>/python3, a symlink to the Python that has torch.
  std::string torchPython(const std::string& dir) {
    fs::create_directories(dir_.path() / dir);
    const fs::path python = dir_.path() / dir / "python3";
    fs::create_symlink(DDPRUN_TORCH_PYTHON, python);
    return python.string();
  }

  // <dir>/python3, a shell script that notes its call in <dir>/calls and
  // runs the same Python isolated and without site packages: no torch.
  std::string pythonWithoutTorch(const std::string& dir) {
    fs::create_directories(dir_.path() / dir);
    const fs::path python = dir_.path() / dir / "python3";
    std::ofstream(python) << "#!/bin/sh\necho called >> '" << (dir_.path() / dir / "calls").string()
                          << "'\nexec " << DDPRUN_TORCH_PYTHON << " -I -S \"$@\"\n";
    fs::permissions(python, fs::perms::owner_all);
    return python.string();
  }

  std::string pathOf(std::initializer_list<const char*> dirs) const {
    std::string path;
    for (const char* dir : dirs) {
      path += (path.empty() ? "" : ":") + (dir_.path() / dir).string();
    }
    return path;
  }

  std::vector<std::string> pythonJob() {
    return {"--standalone", "--nproc-per-node", "1", script_};
  }

  std::string script_;
};

// The first python3 on PATH cannot find torch (a pyenv shim, a system
// Python): the workers run with the next one that can, and one line says so.
TEST_F(DdprunInterpreterTest, TheFirstPython3OnPathThatFindsTorchRunsTheWorkers) {
  const std::string shim = pythonWithoutTorch("shim");
  const std::string good = torchPython("good");
  extra_env_ = {{"PATH", pathOf({"shim", "good"}) + ":/usr/bin:/bin"}};
  const Outcome outcome = run(pythonJob());
  ASSERT_TRUE(outcome.status.success()) << outcome.stderr_text;
  EXPECT_EQ(outcome.stdout_text, good + "\n") << outcome.stderr_text;
  EXPECT_EQ(countOf(outcome.stderr_text, "workers' Python: " + good), 1) << outcome.stderr_text;
  EXPECT_TRUE(contains(outcome.stderr_text, shim)) << "the line names the one passed over";
}

// No line when the first python3 on PATH is the one.
TEST_F(DdprunInterpreterTest, TheFirstPython3OnPathIsNotAnnounced) {
  const std::string good = torchPython("good");
  extra_env_ = {{"PATH", pathOf({"good"}) + ":/usr/bin:/bin"}};
  const Outcome outcome = run(pythonJob());
  ASSERT_TRUE(outcome.status.success()) << outcome.stderr_text;
  EXPECT_EQ(outcome.stdout_text, good + "\n");
  EXPECT_FALSE(contains(outcome.stderr_text, "workers' Python")) << outcome.stderr_text;
}

// An activated virtual environment's (or conda environment's) Python wins
// over PATH, as torchrun started from it would run its own.
TEST_F(DdprunInterpreterTest, TheActiveEnvironmentWinsOverPath) {
  torchPython("good");
  for (const char* variable : {"VIRTUAL_ENV", "CONDA_PREFIX"}) {
    const fs::path prefix = dir_.path() / variable;
    fs::create_directories(prefix / "bin");
    const fs::path python = prefix / "bin" / "python";
    fs::create_symlink(DDPRUN_TORCH_PYTHON, python);
    extra_env_ = {{"PATH", pathOf({"good"}) + ":/usr/bin:/bin"}, {variable, prefix.string()}};
    const Outcome outcome = run(pythonJob());
    ASSERT_TRUE(outcome.status.success()) << outcome.stderr_text;
    EXPECT_EQ(outcome.stdout_text, python.string() + "\n") << variable;
    EXPECT_EQ(countOf(outcome.stderr_text, "workers' Python: " + python.string()), 1)
        << outcome.stderr_text;
    EXPECT_TRUE(contains(outcome.stderr_text, variable)) << outcome.stderr_text;
  }
}

// $PYTHON_EXEC is taken as given: no check, no line.
TEST_F(DdprunInterpreterTest, PythonExecIsTakenAsGiven) {
  const std::string shim = pythonWithoutTorch("shim");
  extra_env_ = {{"PATH", pathOf({"shim"})}, {"PYTHON_EXEC", shim}};
  const Outcome outcome = run(pythonJob());
  ASSERT_TRUE(outcome.status.success()) << outcome.stderr_text;
  EXPECT_EQ(outcome.stdout_text, std::string(DDPRUN_TORCH_PYTHON) + "\n");
  EXPECT_EQ(countOf(readFile(dir_.path() / "shim" / "calls"), "called"), 1) << "one worker only";
}

// No python3 on PATH finds torch: one line naming each one tried, exit 2,
// and no worker started.
TEST_F(DdprunInterpreterTest, NoPythonThatFindsTorchIsOneLineAndExitTwo) {
  const std::string first = pythonWithoutTorch("shim");
  const std::string second = pythonWithoutTorch("other");
  extra_env_ = {{"PATH", pathOf({"shim", "other"})}};
  const Outcome outcome = run(pythonJob());
  EXPECT_EQ(outcome.status, (ExitStatus{ExitStatus::Kind::Exited, 2})) << outcome.stderr_text;
  EXPECT_EQ(outcome.stdout_text, "") << "a worker ran";
  EXPECT_EQ(outcome.stderr_text.rfind("ddprun: no Python that can import torch", 0), 0u)
      << outcome.stderr_text;
  EXPECT_EQ(countOf(outcome.stderr_text, "\n"), 1) << outcome.stderr_text;
  EXPECT_TRUE(contains(outcome.stderr_text, first)) << outcome.stderr_text;
  EXPECT_TRUE(contains(outcome.stderr_text, second)) << outcome.stderr_text;
  EXPECT_TRUE(contains(outcome.stderr_text, "PYTHON_EXEC")) << outcome.stderr_text;
}

// --no-python and programs that are not Python never look for an
// interpreter: the shim first on PATH is never run.
TEST_F(DdprunInterpreterTest, WorkersWithoutPythonNeverCheckForOne) {
  pythonWithoutTorch("shim");
  extra_env_ = {{"PATH", pathOf({"shim"}) + ":/usr/bin:/bin"}};
  const fs::path program = dir_.path() / "job.sh";
  std::ofstream(program) << "#!/bin/sh\nexit 0\n";
  fs::permissions(program, fs::perms::owner_all);
  for (const std::vector<std::string>& args :
       {fakeWorkers(2, {}), std::vector<std::string>{"--standalone", program.string()}}) {
    const Outcome outcome = run(args);
    EXPECT_TRUE(outcome.status.success()) << outcome.stderr_text;
    EXPECT_FALSE(fs::exists(dir_.path() / "shim" / "calls")) << args.back();
  }
}

// The workers get only the NCCL error-handling name their torch reads, so a
// torch 2.2 or later prints no deprecation warning per rank; the version is
// read from the torch the probe finds ($PYTHON_EXEC's too), here a fake
// torch 2.6 first on PYTHONPATH; as torch 2.1 it gets the old name.
TEST_F(DdprunInterpreterTest, WorkersGetOnlyTheNcclNameTheirTorchReads) {
  const fs::path torch = dir_.path() / "site" / "torch";
  fs::create_directories(torch);
  std::ofstream(torch / "__init__.py") << "";
  std::ofstream(torch / "version.py") << "__version__ = '2.6.0'\n";
  const std::string names = (dir_.path() / "names.py").string();
  std::ofstream(names) << "import os\n"
                       << "for name in ('TORCH_NCCL_ASYNC_ERROR_HANDLING', "
                          "'NCCL_ASYNC_ERROR_HANDLING'):\n"
                       << "    print(name, os.environ.get(name, '-'))\n";
  const std::string python = torchPython("good");
  extra_env_ = {{"PATH", "/usr/bin:/bin"},
                {"PYTHON_EXEC", python},
                {"PYTHONPATH", (dir_.path() / "site").string()}};
  Outcome outcome = run({"--standalone", "--nproc-per-node", "1", names});
  ASSERT_TRUE(outcome.status.success()) << outcome.stderr_text;
  EXPECT_EQ(outcome.stdout_text,
            "TORCH_NCCL_ASYNC_ERROR_HANDLING 1\nNCCL_ASYNC_ERROR_HANDLING -\n");

  std::ofstream(torch / "version.py") << "__version__ = '2.1.2'\n";
  outcome = run({"--standalone", "--nproc-per-node", "1", names});
  ASSERT_TRUE(outcome.status.success()) << outcome.stderr_text;
  EXPECT_EQ(outcome.stdout_text,
            "TORCH_NCCL_ASYNC_ERROR_HANDLING -\nNCCL_ASYNC_ERROR_HANDLING 1\n");
}

}  // namespace
}  // namespace ddprun::launcher

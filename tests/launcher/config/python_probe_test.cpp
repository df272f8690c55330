// findsTorch, the probe that picks the workers' Python, against real
// interpreters: yes for the Python that has torch, no for the same Python
// without its site packages, for a program that is not there, and, at its
// deadline, for one that never answers. It must never import torch; a kept
// answer starts no Python at all.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>

#include "ddprun/launcher/config/python_interpreter.hpp"
#include "ddprun/launcher/process/subprocess.hpp"
#include "ddprun/test_support/temp_dir.hpp"

namespace ddprun::launcher {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using test_support::TempDir;

// Asks afresh each time, in this test's environment.
TorchProbeOptions uncached(std::chrono::milliseconds deadline) {
  return {deadline, inheritedEnvironment(), std::nullopt};
}

std::string script(const TempDir& dir, const std::string& name, const std::string& body) {
  const fs::path file = dir / name;
  std::ofstream(file) << "#!/bin/sh\n" << body << "\n";
  fs::permissions(file, fs::perms::owner_all);
  return file.string();
}

class PythonProbeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::string(DDPRUN_TORCH_PYTHON).empty()) {
      GTEST_SKIP() << "no Python with torch on this machine";
    }
  }
  TempDir dir_{"ddprun-probe"};
};

TEST_F(PythonProbeTest, FindsTorchWhereItIsAndNowhereElse) {
  EXPECT_TRUE(findsTorch(DDPRUN_TORCH_PYTHON, uncached(10s)));
  const std::string without_site =
      script(dir_, "python3", std::string("exec ") + DDPRUN_TORCH_PYTHON + " -I -S \"$@\"");
  EXPECT_FALSE(findsTorch(without_site, uncached(10s)));
  EXPECT_FALSE(findsTorch((dir_ / "missing" / "python3").string(), uncached(10s)));
}

TEST_F(PythonProbeTest, AnInterpreterThatNeverAnswersIsPassedByAtTheDeadline) {
  const std::string stuck = script(dir_, "python3", "exec sleep 60");
  const auto started = std::chrono::steady_clock::now();
  EXPECT_FALSE(findsTorch(stuck, uncached(300ms)));
  EXPECT_LT(std::chrono::steady_clock::now() - started, 5s);
}

// The probe only looks torch up: a torch whose import takes 30 s (first on
// the path) is found well within the probe's 10 s.
TEST_F(PythonProbeTest, ItNeverImportsTorch) {
  const std::string slow_torch_dir = (dir_ / "site" / "torch").string();
  fs::create_directories(slow_torch_dir);
  std::ofstream(fs::path(slow_torch_dir) / "__init__.py") << "import time\ntime.sleep(30)\n";
  const std::string python = script(
      dir_, "python3",
      "PYTHONPATH='" + (dir_ / "site").string() + "' exec " + DDPRUN_TORCH_PYTHON + " \"$@\"");
  const auto started = std::chrono::steady_clock::now();
  EXPECT_TRUE(findsTorch(python, uncached(10s)));
  EXPECT_LT(std::chrono::steady_clock::now() - started, 5s);
}

// A torch/ source tree in the working directory is not torch installed: a
// worker's script has its own directory first on sys.path, not ddprun's.
TEST_F(PythonProbeTest, ATorchTreeInTheWorkingDirectoryDoesNotCount) {
  const fs::path checkout = dir_ / "checkout";
  fs::create_directories(checkout / "torch");
  std::ofstream(checkout / "torch" / "__init__.py") << "";
  const std::string without_site =
      script(dir_, "python3",
             "cd '" + checkout.string() + "' && exec " + DDPRUN_TORCH_PYTHON + " -S \"$@\"");
  EXPECT_FALSE(findsTorch(without_site, uncached(10s)));
}

// torch's version is read from the version.py beside the __init__.py the
// probe found, never by importing torch.
TEST_F(PythonProbeTest, TorchsVersionIsReadBesideTheOriginFound) {
  const fs::path torch = dir_ / "site" / "torch";
  fs::create_directories(torch);
  std::ofstream(torch / "__init__.py") << "raise SystemExit('never imported')\n";
  std::ofstream(torch / "version.py") << "from typing import Optional\n__version__ = '2.6.0+cpu'\n";
  const std::string python = script(
      dir_, "python3",
      "PYTHONPATH='" + (dir_ / "site").string() + "' exec " + DDPRUN_TORCH_PYTHON + " \"$@\"");
  const auto origin = torchOrigin(python, uncached(10s));
  ASSERT_TRUE(origin);
  EXPECT_EQ(fs::path(*origin), torch / "__init__.py");
  EXPECT_EQ(torchVersionAt(*origin), (TorchVersion{2, 6}));
  std::ofstream(torch / "version.py") << "git_version = 'Unknown'\n";
  EXPECT_EQ(torchVersionAt(*origin), std::nullopt);
  EXPECT_EQ(torchVersionAt(""), std::nullopt);
}

// A kept answer is given without starting Python: within 1 ms, where asking
// Python takes tens. The environment is the test's own, so that no recent
// directory (a PYTHONPATH made a moment ago) keeps the answer from being kept.
TEST_F(PythonProbeTest, AKeptAnswerIsGivenWithoutStartingPython) {
  TorchProbeOptions options{
      10s, {{"PATH", "/usr/bin:/bin"}, {"HOME", dir_.path().string()}}, dir_ / "cache.json"};
  ASSERT_TRUE(findsTorch(DDPRUN_TORCH_PYTHON, options));
  options.deadline = 1ms;
  EXPECT_TRUE(findsTorch(DDPRUN_TORCH_PYTHON, options));
  options.cache_file.reset();
  EXPECT_FALSE(findsTorch(DDPRUN_TORCH_PYTHON, options)) << "Python answered within 1 ms";
}

}  // namespace
}  // namespace ddprun::launcher

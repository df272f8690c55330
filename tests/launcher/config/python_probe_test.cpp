// findsTorch, the probe that picks the workers' Python, against real
// interpreters: yes for the Python that has torch, no for the same Python
// without its site packages, for a program that is not there, and, at its
// deadline, for one that never answers. It must never import torch.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>

#include "ddprun/launcher/config/python_interpreter.hpp"
#include "ddprun/test_support/temp_dir.hpp"

namespace ddprun::launcher {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using test_support::TempDir;

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
  EXPECT_TRUE(findsTorch(DDPRUN_TORCH_PYTHON, 10s));
  const std::string without_site =
      script(dir_, "python3", std::string("exec ") + DDPRUN_TORCH_PYTHON + " -I -S \"$@\"");
  EXPECT_FALSE(findsTorch(without_site, 10s));
  EXPECT_FALSE(findsTorch((dir_ / "missing" / "python3").string(), 10s));
}

TEST_F(PythonProbeTest, AnInterpreterThatNeverAnswersIsPassedByAtTheDeadline) {
  const std::string stuck = script(dir_, "python3", "exec sleep 60");
  const auto started = std::chrono::steady_clock::now();
  EXPECT_FALSE(findsTorch(stuck, 300ms));
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
  EXPECT_TRUE(findsTorch(python, 10s));
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
  EXPECT_FALSE(findsTorch(without_site, 10s));
}

}  // namespace
}  // namespace ddprun::launcher

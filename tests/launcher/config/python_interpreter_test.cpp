// Which Python runs script workers (docs/torchrun-contract.md §4), with a
// stand-in probe: the order ($PYTHON_EXEC, the active virtual or conda
// environment, then PATH), when the choice is worth a line, and the error
// when nothing fits. The real probe runs in python_probe_test.cpp.
#include "ddprun/launcher/config/python_interpreter.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "ddprun/proto/errors.hpp"
#include "ddprun/test_support/temp_dir.hpp"

namespace ddprun::launcher {
namespace {

namespace fs = std::filesystem;
using test_support::TempDir;

// Makes <dir>/<relative>, an executable file; returns its path.
std::string executable(const TempDir& dir, const std::string& relative) {
  const fs::path file = dir / relative;
  fs::create_directories(file.parent_path());
  std::ofstream(file) << "#!/bin/sh\n";
  fs::permissions(file, fs::perms::owner_all);
  return file.string();
}

// A probe that says yes for `with_torch` and notes every question.
struct StandInProbe {
  std::set<std::string> with_torch;
  std::vector<std::string> asked;
  TorchProbe probe() {
    return [this](const std::string& python) {
      asked.push_back(python);
      return with_torch.contains(python);
    };
  }
};

std::string errorOf(const Environment& env, StandInProbe& probe) {
  try {
    choosePython(env, probe.probe());
  } catch (const ConfigError& error) {
    return error.what();
  }
  return "<no error>";
}

TEST(ChoosePython, PythonExecIsTakenAsGivenWithoutAsking) {
  const TempDir dir{"ddprun-py"};
  const std::string on_path = executable(dir, "a/python3");
  StandInProbe probe;
  const PythonChoice choice = choosePython(
      mapEnvironment({{"PYTHON_EXEC", "/opt/py/bin/python"}, {"PATH", (dir / "a").string()}}),
      probe.probe());
  EXPECT_EQ(choice.path, "/opt/py/bin/python");
  EXPECT_EQ(choice.why, "");
  EXPECT_TRUE(probe.asked.empty());
}

TEST(ChoosePython, TheFirstOnPathThatFindsTorchAndWhy) {
  const TempDir dir{"ddprun-py"};
  const std::string shim = executable(dir, "shims/python3");
  const std::string good = executable(dir, "good/python3");
  const std::string later = executable(dir, "later/python3");
  StandInProbe probe{{good, later}, {}};
  const std::string path = (dir / "shims").string() + ":" + (dir / "none").string() + ":" +
                           (dir / "good").string() + ":" + (dir / "later").string();
  const PythonChoice choice =
      choosePython(mapEnvironment({{"PATH", path}, {"PYTHON_EXEC", ""}}), probe.probe());
  EXPECT_EQ(choice.path, good);
  EXPECT_NE(choice.why.find(shim + " cannot"), std::string::npos) << choice.why;
  EXPECT_EQ(probe.asked, (std::vector<std::string>{shim, good})) << "asked past the first fit";
}

TEST(ChoosePython, TheFirstOnPathIsNotWorthALine) {
  const TempDir dir{"ddprun-py"};
  const std::string good = executable(dir, "good/python3");
  StandInProbe probe{{good}, {}};
  const PythonChoice choice =
      choosePython(mapEnvironment({{"PATH", (dir / "good").string()}}), probe.probe());
  EXPECT_EQ(choice.path, good);
  EXPECT_EQ(choice.why, "");
}

// An active environment that finds torch is taken, the virtual environment
// before conda's; said in a line unless its bin/ leads PATH (activated).
TEST(ChoosePython, TheActiveEnvironmentComesBeforePath) {
  const TempDir dir{"ddprun-py"};
  const std::string on_path = executable(dir, "usr/python3");
  const std::string venv = executable(dir, "venv/bin/python");
  const std::string conda = executable(dir, "conda/bin/python");
  StandInProbe probe{{on_path, venv, conda}, {}};
  const std::string path = (dir / "usr").string();
  PythonChoice choice = choosePython(mapEnvironment({{"PATH", path},
                                                     {"VIRTUAL_ENV", (dir / "venv").string()},
                                                     {"CONDA_PREFIX", (dir / "conda").string()}}),
                                     probe.probe());
  EXPECT_EQ(choice.path, venv);
  EXPECT_NE(choice.why.find("$VIRTUAL_ENV"), std::string::npos) << choice.why;
  EXPECT_NE(choice.why.find(on_path), std::string::npos) << choice.why;
  choice = choosePython(
      mapEnvironment({{"PATH", path}, {"CONDA_PREFIX", (dir / "conda").string()}}), probe.probe());
  EXPECT_EQ(choice.path, conda);
  EXPECT_NE(choice.why.find("$CONDA_PREFIX"), std::string::npos) << choice.why;
  EXPECT_EQ(probe.asked, (std::vector<std::string>{venv, conda})) << "PATH was asked";
  executable(dir, "venv/bin/python3");
  choice = choosePython(mapEnvironment({{"PATH", (dir / "venv" / "bin").string() + ":" + path},
                                        {"VIRTUAL_ENV", (dir / "venv").string()}}),
                        probe.probe());
  EXPECT_EQ(choice.path, venv);
  EXPECT_EQ(choice.why, "") << "an activated environment leads PATH";
}

// An environment without torch (a conda base a shell activated, while the
// job's torch comes from PATH) is passed by, and named.
TEST(ChoosePython, AnActiveEnvironmentWithoutTorchIsPassedBy) {
  const TempDir dir{"ddprun-py"};
  const std::string on_path = executable(dir, "usr/python3");
  const std::string conda = executable(dir, "conda/bin/python");
  StandInProbe probe{{on_path}, {}};
  const PythonChoice choice =
      choosePython(mapEnvironment({{"PATH", (dir / "usr").string()},
                                   {"CONDA_PREFIX", (dir / "conda").string()}}),
                   probe.probe());
  EXPECT_EQ(choice.path, on_path);
  EXPECT_NE(choice.why.find(conda + " (no torch)"), std::string::npos) << choice.why;
}

// A VIRTUAL_ENV without bin/python falls back to PATH, and says so if
// nothing fits.
TEST(ChoosePython, NothingFitsIsOneErrorNamingEveryTry) {
  const TempDir dir{"ddprun-py"};
  const std::string first = executable(dir, "a/python3");
  const std::string second = executable(dir, "b/python3");
  StandInProbe probe;
  const std::string error =
      errorOf(mapEnvironment({{"PATH", (dir / "a").string() + ":" + (dir / "b").string()},
                              {"VIRTUAL_ENV", (dir / "gone").string()}}),
              probe);
  EXPECT_EQ(error.rfind("no Python that can import torch: PYTHON_EXEC is unset", 0), 0u) << error;
  EXPECT_NE(error.find("$VIRTUAL_ENV (no " + (dir / "gone" / "bin" / "python").string() + ")"),
            std::string::npos)
      << error;
  EXPECT_NE(error.find(first + ", " + second), std::string::npos) << error;
  EXPECT_NE(error.find("set PYTHON_EXEC"), std::string::npos) << error;
  EXPECT_NE(errorOf(mapEnvironment({{"PATH", (dir / "none").string()}}), probe)
                .find("there is no python3 on PATH"),
            std::string::npos);
}

}  // namespace
}  // namespace ddprun::launcher

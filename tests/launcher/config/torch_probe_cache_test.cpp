// TorchProbeCache on files made by the test (no Python is started): a kept
// answer holds while nothing it was read from changes, and is stale as soon
// as a .pth file, a package or the interpreter's variables do. Answers it
// must not keep (not found, a script, files changed a moment ago) are not.
#include "ddprun/launcher/config/torch_probe_cache.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>

#include "ddprun/test_support/temp_dir.hpp"

namespace ddprun::launcher {
namespace {

namespace fs = std::filesystem;
using test_support::TempDir;

// Any ELF program stands for the interpreter: the cache only stamps it.
constexpr const char* kInterpreter = "/bin/true";

class TorchProbeCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::create_directories(site_ / "torch");
    std::ofstream(site_ / "torch" / "__init__.py") << "";
    std::ofstream(site_ / "editable.pth") << "/src/one\n";
    settle();
  }

  // Every file the test made, dated an hour back: as a real install is.
  void settle() const {
    const auto old = fs::file_time_type::clock::now() - std::chrono::hours(1);
    for (const auto& entry : fs::recursive_directory_iterator(site_)) {
      fs::last_write_time(entry.path(), old);
    }
    fs::last_write_time(site_, old);
  }

  TorchProbeAnswer found() const {
    return {true, (site_ / "torch" / "__init__.py").string(), {site_.string(), "/nonexistent.zip"}};
  }

  bool keptAfterRemembering() const {
    cache_.remember(kInterpreter, env_, found());
    return cache_.keptTorchOrigin(kInterpreter, env_).has_value();
  }

  TempDir dir_{"ddprun-probe-cache"};
  fs::path site_ = dir_ / "site";
  ProbeEnv env_ = {{"PATH", "/usr/bin"}, {"PYTHONPATH", site_.string()}, {"HOME", "/home/x"}};
  TorchProbeCache cache_{dir_ / "cache" / "python-probes.json"};
};

TEST_F(TorchProbeCacheTest, AnAnswerHoldsWhileNothingItWasReadFromChanges) {
  EXPECT_FALSE(cache_.keptTorchOrigin(kInterpreter, env_).has_value());
  ASSERT_TRUE(keptAfterRemembering());
  EXPECT_EQ(cache_.keptTorchOrigin(kInterpreter, env_), found().torch_origin);
  EXPECT_TRUE(fs::exists(cache_.file()));
}

TEST_F(TorchProbeCacheTest, AnEditedPthFileMakesItStale) {
  ASSERT_TRUE(keptAfterRemembering());
  std::ofstream(site_ / "editable.pth") << "/src/two\n";
  EXPECT_FALSE(cache_.keptTorchOrigin(kInterpreter, env_).has_value());
}

TEST_F(TorchProbeCacheTest, ANewPthFileOrSitecustomizeMakesItStale) {
  ASSERT_TRUE(keptAfterRemembering());
  std::ofstream(site_ / "other.pth") << "/src/other\n";
  EXPECT_FALSE(cache_.keptTorchOrigin(kInterpreter, env_).has_value());

  settle();
  ASSERT_TRUE(keptAfterRemembering());
  std::ofstream(site_ / "sitecustomize.py") << "import sys\n";
  EXPECT_FALSE(cache_.keptTorchOrigin(kInterpreter, env_).has_value());
}

TEST_F(TorchProbeCacheTest, TorchRemovedMakesItStale) {
  ASSERT_TRUE(keptAfterRemembering());
  fs::remove_all(site_ / "torch");
  EXPECT_FALSE(cache_.keptTorchOrigin(kInterpreter, env_).has_value());
}

TEST_F(TorchProbeCacheTest, AnotherInterpreterOrOtherPythonVariablesAreAnotherQuestion) {
  ASSERT_TRUE(keptAfterRemembering());
  EXPECT_FALSE(cache_.keptTorchOrigin("/bin/false", env_).has_value());
  ProbeEnv other_path = env_;
  other_path[1].second = "/elsewhere";
  EXPECT_FALSE(cache_.keptTorchOrigin(kInterpreter, other_path).has_value());
  ProbeEnv other_home = env_;
  other_home[2].second = "/home/y";
  EXPECT_FALSE(cache_.keptTorchOrigin(kInterpreter, other_home).has_value());
  // PATH is not one of them: sys.path does not depend on it.
  ProbeEnv other_unrelated = env_;
  other_unrelated[0].second = "/bin";
  EXPECT_TRUE(cache_.keptTorchOrigin(kInterpreter, other_unrelated).has_value());
}

TEST_F(TorchProbeCacheTest, NotFoundAndScriptsAreNeverKept) {
  cache_.remember(kInterpreter, env_, TorchProbeAnswer{false, "", {site_.string()}});
  EXPECT_FALSE(cache_.keptTorchOrigin(kInterpreter, env_).has_value());

  const fs::path shim = dir_ / "python3";
  std::ofstream(shim) << "#!/bin/sh\nexec python3 \"$@\"\n";
  fs::permissions(shim, fs::perms::owner_all);
  EXPECT_FALSE(isCacheableInterpreter(shim.string()));
  EXPECT_TRUE(isCacheableInterpreter(kInterpreter));
  cache_.remember(shim.string(), env_, found());
  EXPECT_FALSE(cache_.keptTorchOrigin(shim.string(), env_).has_value());
}

TEST_F(TorchProbeCacheTest, AnAnswerReadFromFilesChangedAMomentAgoIsNotKept) {
  std::ofstream(site_ / "new.pth") << "/src/new\n";
  EXPECT_FALSE(keptAfterRemembering());
  settle();
  EXPECT_TRUE(keptAfterRemembering());
}

TEST_F(TorchProbeCacheTest, ACorruptCacheFileIsIgnoredThenReplaced) {
  fs::create_directories(cache_.file().parent_path());
  std::ofstream(cache_.file()) << "{not json";
  EXPECT_FALSE(cache_.keptTorchOrigin(kInterpreter, env_).has_value());
  EXPECT_TRUE(keptAfterRemembering());
}

TEST(DefaultProbeCacheFileTest, XdgCacheHomeThenHomeAndOffWhenAsked) {
  EXPECT_EQ(defaultProbeCacheFile(mapEnvironment({{"XDG_CACHE_HOME", "/c"}, {"HOME", "/h"}})),
            fs::path("/c/ddprun/python-probes.json"));
  EXPECT_EQ(defaultProbeCacheFile(mapEnvironment({{"HOME", "/h"}})),
            fs::path("/h/.cache/ddprun/python-probes.json"));
  EXPECT_EQ(defaultProbeCacheFile(mapEnvironment({})), std::nullopt);
  EXPECT_EQ(
      defaultProbeCacheFile(mapEnvironment({{"HOME", "/h"}, {"DDPRUN_PYTHON_PROBE_CACHE", "0"}})),
      std::nullopt);
}

}  // namespace
}  // namespace ddprun::launcher

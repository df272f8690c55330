// `--nproc-per-node gpu|auto` and `ddprun devices` on a pretend GPU machine:
// the fake libcuda.so.1 and libnvidia-ml.so.1 (tests/fake_gpu) first on the
// agent's library path, with NVML and the driver (NVML counts), or the
// driver alone (it counts). Every case runs the real ddprun binary.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "ddprun/test_support/proc_status.hpp"
#include "ddprun/test_support/sanitizer.hpp"
#include "ddprun_binary_fixture.hpp"

namespace ddprun::launcher {
namespace {

using namespace std::chrono_literals;
using testing::countOf;
using testing::DdprunBinaryTest;
using testing::Outcome;

enum class Libraries { kNvmlAndDriver, kDriverOnly };

std::string nameOf(const ::testing::TestParamInfo<Libraries>& info) {
  return info.param == Libraries::kNvmlAndDriver ? "NvmlAndDriver" : "DriverOnly";
}

class DdprunGpuCountTest : public DdprunBinaryTest,
                           public ::testing::WithParamInterface<Libraries> {
 protected:
  // A machine with `gpus` devices and the given libraries; more FAKE_GPU_*
  // settings or CUDA_VISIBLE_DEVICES go in `more`.
  void fakeMachine(int gpus, Libraries libraries,
                   std::vector<std::pair<std::string, std::string>> more = {}) {
    const std::string path = libraries == Libraries::kNvmlAndDriver
                                 ? std::string(DDPRUN_FAKE_NVML_DIR) + ":" + DDPRUN_FAKE_CUDA_DIR
                                 : std::string(DDPRUN_FAKE_CUDA_DIR);
    extra_env_ = {{"LD_LIBRARY_PATH", path},
                  {"FAKE_GPU_COUNT", std::to_string(gpus)},
                  {"FAKE_GPU_CALL_LOG", (dir_.path() / "calls").string()}};
    extra_env_.insert(extra_env_.end(), more.begin(), more.end());
  }

  std::string countedBy() const {
    return GetParam() == Libraries::kNvmlAndDriver ? "counted by NVML"
                                                   : "counted by the CUDA driver";
  }

  std::vector<std::string> gpuJob(const std::string& nproc, bool hang = false) {
    std::vector<std::string> args = {"--standalone",      "--nproc-per-node", nproc,
                                     "--no-python",       DDPRUN_FAKE_WORKER, "--ready-to",
                                     dir_.path().string()};
    if (hang) {
      args.emplace_back("--hang");
    }
    return args;
  }

  // The LOCAL_RANKs whose workers started (each wrote <LOCAL_RANK>.ready).
  std::set<int> localRanksStarted() const {
    std::set<int> ranks;
    for (const auto& entry : std::filesystem::directory_iterator(dir_.path())) {
      if (entry.path().extension() == ".ready") {
        ranks.insert(std::stoi(entry.path().stem().string()));
      }
    }
    return ranks;
  }

  // Each "<pid> <call>" line the fake libraries logged.
  std::vector<std::pair<pid_t, std::string>> libraryCalls() const {
    std::vector<std::pair<pid_t, std::string>> calls;
    std::ifstream log(dir_.path() / "calls");
    pid_t pid = 0;
    std::string call;
    while (log >> pid >> call) {
      calls.emplace_back(pid, call);
    }
    return calls;
  }
};

// The settings of a fake library whose `call` crashes (SIGSEGV), as the
// count's child should see it. Under ASan its SEGV handler would turn the
// signal into a report and exit 1, so the child would not die of the signal
// this test is about; handle_segv=0 leaves the signal to kill it, as in a
// plain build.
std::vector<std::pair<std::string, std::string>> crashIn(const std::string& call) {
  std::vector<std::pair<std::string, std::string>> settings = {{"FAKE_GPU_CRASH", call}};
  if (test_support::kAddressSanitizer) {
    settings.emplace_back("ASAN_OPTIONS", test_support::asanOptionsWith("handle_segv=0"));
  }
  return settings;
}

std::set<int> upTo(int count) {
  std::set<int> ranks;
  for (int rank = 0; rank < count; ++rank) {
    ranks.insert(rank);
  }
  return ranks;
}

TEST_P(DdprunGpuCountTest, EightGpusAreEightWorkersWithLocalRanks0To7) {
  fakeMachine(8, GetParam());
  const Outcome outcome = runFor(gpuJob("gpu"), 30s);
  ASSERT_TRUE(outcome.status.success()) << outcome.stderr_text;
  EXPECT_EQ(localRanksStarted(), upTo(8));
  EXPECT_EQ(countOf(outcome.stderr_text, "8 GPU(s) visible, " + countedBy()), 1)
      << outcome.stderr_text;
}

// CUDA_VISIBLE_DEVICES picks as the workers' CUDA will: ordinals, UUID
// prefixes, an entry naming no device ends the list, a repeat empties it.
TEST_P(DdprunGpuCountTest, VisibleDevicesDecideTheCount) {
  const std::vector<std::pair<std::string, int>> cases = {{"2,5", 2},
                                                          {"GPU-5,GPU-2", 2},
                                                          {"0,9,1", 1},
                                                          {"3,x,1", 1},
                                                          {"GPU-1,GPU-,GPU-2", 1},
                                                          {"7", 1},
                                                          {"1,1", 0},
                                                          {"9", 0},
                                                          {"GPU-9", 0},
                                                          {"1,2147483648", 1},
                                                          {"4294967296", 0},
                                                          {"99999999999999999999", 0}};
  for (const auto& [visible, expected] : cases) {
    std::filesystem::remove_all(dir_.path());
    std::filesystem::create_directories(dir_.path());
    fakeMachine(8, GetParam(), {{"CUDA_VISIBLE_DEVICES", visible}});
    const Outcome outcome = runFor(gpuJob("gpu"), 30s);
    if (expected == 0) {
      EXPECT_EQ(outcome.status.code, 2) << visible << ": " << outcome.stderr_text;
      EXPECT_EQ(countOf(outcome.stderr_text, "no CUDA GPU is visible"), 1)
          << visible << ": " << outcome.stderr_text;
    } else {
      ASSERT_TRUE(outcome.status.success()) << visible << ": " << outcome.stderr_text;
    }
    EXPECT_EQ(localRanksStarted(), upTo(expected)) << visible;
  }
}

TEST_P(DdprunGpuCountTest, EmptyVisibleDevicesIsOneClearNoGpuLine) {
  fakeMachine(8, GetParam(), {{"CUDA_VISIBLE_DEVICES", ""}});
  const Outcome outcome = runFor(gpuJob("gpu"), 30s);
  EXPECT_EQ(outcome.status.code, 2) << outcome.stderr_text;
  EXPECT_EQ(outcome.stderr_text,
            "ddprun: --nproc-per-node gpu: no CUDA GPU is visible: CUDA_VISIBLE_DEVICES is set "
            "and empty, which hides every GPU\n");
  EXPECT_TRUE(libraryCalls().empty()) << "a library was asked although nothing can be visible";
}

TEST_P(DdprunGpuCountTest, AutoIsTheGpusWhenThereAreAnyElseTheCpus) {
  fakeMachine(3, GetParam());
  Outcome outcome = runFor(gpuJob("auto"), 30s);
  ASSERT_TRUE(outcome.status.success()) << outcome.stderr_text;
  EXPECT_EQ(localRanksStarted(), upTo(3));

  std::filesystem::remove_all(dir_.path());
  std::filesystem::create_directories(dir_.path());
  fakeMachine(0, GetParam());
  outcome = runFor(gpuJob("auto"), 30s);
  ASSERT_TRUE(outcome.status.success()) << outcome.stderr_text;
  EXPECT_EQ(localRanksStarted(),
            upTo(static_cast<int>(std::max(1u, std::thread::hardware_concurrency()))));
}

INSTANTIATE_TEST_SUITE_P(FakeLibraries, DdprunGpuCountTest,
                         ::testing::Values(Libraries::kNvmlAndDriver, Libraries::kDriverOnly),
                         nameOf);

using DdprunGpuFailureTest = DdprunGpuCountTest;

// The driver is there but cannot start: one line naming its error, and
// what NVML said before it.
TEST_F(DdprunGpuFailureTest, CuInitFailingIsOneLineNamingTheError) {
  for (const auto& [error, name] : std::vector<std::pair<int, std::string>>{
           {100, "CUDA_ERROR_NO_DEVICE"}, {999, "CUDA_ERROR_UNKNOWN"}}) {
    fakeMachine(8, Libraries::kDriverOnly, {{"FAKE_GPU_CUINIT_ERROR", std::to_string(error)}});
    const Outcome outcome = runFor(gpuJob("gpu"), 30s);
    EXPECT_EQ(outcome.status.code, 2) << outcome.stderr_text;
    EXPECT_EQ(countOf(outcome.stderr_text, "\n"), 1) << outcome.stderr_text;
    EXPECT_EQ(outcome.stderr_text.rfind("ddprun: --nproc-per-node gpu: no CUDA GPU is visible: "
                                        "NVML: libnvidia-ml.so.1 is not installed; cuInit failed "
                                        "with CUDA error " +
                                            std::to_string(error) + " (" + name + ")",
                                        0),
              0u)
        << outcome.stderr_text;
    EXPECT_TRUE(localRanksStarted().empty());
  }
}

TEST_F(DdprunGpuFailureTest, NvmlThatCannotStartLeavesTheCountToTheDriver) {
  fakeMachine(4, Libraries::kNvmlAndDriver, {{"FAKE_GPU_NVML_ERROR", "9"}});
  const Outcome outcome = runFor(gpuJob("gpu"), 30s);
  ASSERT_TRUE(outcome.status.success()) << outcome.stderr_text;
  EXPECT_EQ(localRanksStarted(), upTo(4));
  EXPECT_EQ(countOf(outcome.stderr_text, "4 GPU(s) visible, counted by the CUDA driver"), 1)
      << outcome.stderr_text;
}

// A library that crashes takes the short-lived child with it, not the agent.
TEST_F(DdprunGpuFailureTest, ALibraryThatCrashesIsOneLineNotADeadAgent) {
  fakeMachine(8, Libraries::kNvmlAndDriver, crashIn("nvmlInit_v2"));
  const Outcome outcome = runFor(gpuJob("gpu"), 30s);
  EXPECT_EQ(outcome.status.code, 2) << outcome.stderr_text;
  EXPECT_EQ(outcome.stderr_text,
            "ddprun: --nproc-per-node gpu: no CUDA GPU is visible: counting GPUs: the child "
            "asking NVML and the CUDA driver was killed by SIGSEGV (signal 11)\n");
}

// Counting loads NVML or the driver (whose init leaves a thread and 32 MiB
// here, as a real one leaves its own) only into a child: the guardian and the
// agent, which live as long as the job, look as they do when nothing counted.
TEST_F(DdprunGpuFailureTest, CountingLeavesNoThreadOrMemoryInTheAgent) {
  struct Footprint {
    std::size_t threads = 0;
    std::size_t rss_kib = 0;
  };
  const auto footprintOf = [&](const std::string& nproc, Libraries libraries) {
    std::filesystem::remove_all(dir_.path());
    std::filesystem::create_directories(dir_.path());
    fakeMachine(8, libraries);
    Subprocess ddprun = start(gpuJob(nproc, /*hang=*/true));
    test_support::eventually([&] { return localRanksStarted().size() == 8; }, 30s);
    const pid_t guardian = ddprun.pid();
    const pid_t agent = test_support::ddprunAgentOf(guardian);
    EXPECT_NE(agent, guardian);
    std::vector<Footprint> footprints;
    for (const pid_t pid : {guardian, agent}) {
      footprints.push_back({test_support::threadCountOf(pid).value_or(0),
                            test_support::procStatusKiB(pid, "VmRSS").value_or(0)});
    }
    for (const auto& [pid, call] : libraryCalls()) {
      EXPECT_NE(pid, guardian) << call << " ran in the guardian";
      EXPECT_NE(pid, agent) << call << " ran in the agent";
    }
    ddprun.signalGroup(SIGTERM);
    waitFor(ddprun, 20s);
    return footprints;
  };
  for (const Libraries libraries : {Libraries::kNvmlAndDriver, Libraries::kDriverOnly}) {
    const std::vector<Footprint> plain = footprintOf("8", libraries);
    EXPECT_TRUE(libraryCalls().empty());
    const std::vector<Footprint> counted = footprintOf("gpu", libraries);
    EXPECT_EQ(libraryCalls().size(), 1u) << "no library was asked";
    for (std::size_t process = 0; process < plain.size(); ++process) {
      const char* name = process == 0 ? "guardian" : "agent";
      EXPECT_GT(plain[process].threads, 0u) << name;
      EXPECT_EQ(counted[process].threads, plain[process].threads) << name;
      EXPECT_LT(counted[process].rss_kib, plain[process].rss_kib + 16 * 1024)
          << name << ": " << counted[process].rss_kib << " KiB after counting, "
          << plain[process].rss_kib << " KiB without";
    }
  }
}

// An ignored SIGCHLD stays ignored through exec (env --ignore-signal, as a
// parent that ignores it leaves it); the count's child must still be waited
// for, not spun on until the deadline.
TEST_F(DdprunGpuFailureTest, AnInheritedIgnoredSigchldStillCounts) {
  fakeMachine(2, Libraries::kNvmlAndDriver);
  std::string command = "exec 2>'" + (dir_.path() / "stderr").string() + "' >'" +
                        (dir_.path() / "stdout").string() +
                        "'; exec /usr/bin/env --ignore-signal=CHLD '" + DDPRUN_BINARY + "'";
  for (const std::string& arg : gpuJob("gpu")) {
    command += " '" + arg + "'";
  }
  SpawnOptions options;
  options.argv = {"/bin/sh", "-c", command};
  options.env = childEnvironment();
  Subprocess ddprun(options);
  const Outcome outcome = waitFor(ddprun, 20s);
  ASSERT_TRUE(outcome.status.success()) << outcome.stderr_text;
  EXPECT_EQ(localRanksStarted(), upTo(2));
}

// A library that never answers: one line at DDPRUN_GPU_COUNT_TIMEOUT, the
// child killed, and nothing left running.
TEST_F(DdprunGpuFailureTest, ALibraryThatNeverAnswersIsOneLineAtTheDeadline) {
  // Under ASan the counting child takes longer than 0.5 s to reach the
  // library at all, and then there is no hung call to see.
  const std::string timeout = test_support::kAddressSanitizer ? "3" : "0.5";
  fakeMachine(8, Libraries::kNvmlAndDriver,
              {{"FAKE_GPU_HANG", "nvmlInit_v2"}, {"DDPRUN_GPU_COUNT_TIMEOUT", timeout}});
  const Outcome outcome = runFor(gpuJob("gpu"), 20s);
  EXPECT_EQ(outcome.status.code, 2) << outcome.stderr_text;
  EXPECT_EQ(outcome.stderr_text,
            "ddprun: --nproc-per-node gpu: no CUDA GPU is visible: counting GPUs: NVML and the "
            "CUDA driver gave no answer in " +
                timeout + " s (DDPRUN_GPU_COUNT_TIMEOUT)\n");
  const auto calls = libraryCalls();
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_TRUE(test_support::eventually([&] { return ::kill(calls[0].first, 0) != 0; }, 10s))
      << "the hung child (pid " << calls[0].first << ") is still there";

  fakeMachine(8, Libraries::kNvmlAndDriver, {{"DDPRUN_GPU_COUNT_TIMEOUT", "soon"}});
  const Outcome bad = runFor(gpuJob("gpu"), 20s);
  EXPECT_EQ(bad.status.code, 2) << bad.stderr_text;
  EXPECT_EQ(countOf(bad.stderr_text, "DDPRUN_GPU_COUNT_TIMEOUT='soon': expected seconds"), 1)
      << bad.stderr_text;
}

// auto falls back to the CPUs when no GPU is visible, but a count that
// failed outright is said, not taken for "no GPU".
TEST_F(DdprunGpuFailureTest, AutoSaysWhenTheCountItselfFailed) {
  fakeMachine(5, Libraries::kNvmlAndDriver, crashIn("nvmlInit_v2"));
  const Outcome outcome = runFor(gpuJob("auto"), 30s);
  ASSERT_TRUE(outcome.status.success()) << outcome.stderr_text;
  EXPECT_EQ(countOf(outcome.stderr_text,
                    "--nproc-per-node auto: counting GPUs: the child asking NVML and the CUDA "
                    "driver was killed by SIGSEGV (signal 11); using the"),
            1)
      << outcome.stderr_text;
}

// NVML lists devices in PCI order, CUDA fastest first: on a node with two
// models, NVML counts but a CUDA ordinal's bus id comes from the driver.
TEST_F(DdprunGpuFailureTest, OnMixedModelsBusIdsFollowCudasOrder) {
  fakeMachine(4, Libraries::kNvmlAndDriver, {{"FAKE_GPU_FAST", "3"}});
  Outcome outcome = runFor({"devices"}, 20s);
  ASSERT_TRUE(outcome.status.success()) << outcome.stderr_text;
  EXPECT_EQ(outcome.stdout_text,
            "4 CUDA GPUs visible to workers (counted by NVML; CUDA_VISIBLE_DEVICES unset)\n"
            "  cuda:0   0000:48:00.0\n"
            "  cuda:1   0000:18:00.0\n"
            "  cuda:2   0000:28:00.0\n"
            "  cuda:3   0000:38:00.0\n");
  fakeMachine(4, Libraries::kNvmlAndDriver,
              {{"FAKE_GPU_FAST", "3"}, {"CUDA_DEVICE_ORDER", "PCI_BUS_ID"}});
  outcome = runFor({"devices"}, 20s);
  ASSERT_TRUE(outcome.status.success()) << outcome.stderr_text;
  EXPECT_NE(outcome.stdout_text.find("  cuda:0   00000000:18:00.0\n"), std::string::npos)
      << outcome.stdout_text;
}

// The count alone needs no bus id: on two models NVML counts and the
// driver (whose start can take seconds) is never started for it.
TEST_F(DdprunGpuFailureTest, OnMixedModelsTheCountAloneNeverStartsTheDriver) {
  fakeMachine(4, Libraries::kNvmlAndDriver, {{"FAKE_GPU_FAST", "3"}});
  const Outcome outcome = runFor(gpuJob("gpu"), 30s);
  ASSERT_TRUE(outcome.status.success()) << outcome.stderr_text;
  EXPECT_EQ(localRanksStarted(), upTo(4));
  std::vector<std::string> calls;
  for (const auto& [pid, call] : libraryCalls()) {
    calls.push_back(call);
  }
  EXPECT_EQ(calls, std::vector<std::string>{"nvmlInit_v2"});
}

// `ddprun devices` lists what the workers would see, in CUDA ordinal order.
TEST_F(DdprunGpuFailureTest, DevicesListsTheVisibleGpusAndWhatCountedThem) {
  fakeMachine(8, Libraries::kNvmlAndDriver, {{"CUDA_VISIBLE_DEVICES", "5,2"}});
  Outcome outcome = runFor({"devices"}, 20s);
  ASSERT_TRUE(outcome.status.success()) << outcome.stderr_text;
  EXPECT_EQ(outcome.stdout_text,
            "2 CUDA GPUs visible to workers (counted by NVML; CUDA_VISIBLE_DEVICES=5,2)\n"
            "  cuda:0   00000000:68:00.0\n"
            "  cuda:1   00000000:38:00.0\n");

  fakeMachine(8, Libraries::kDriverOnly, {{"CUDA_VISIBLE_DEVICES", "5,2"}});
  outcome = runFor({"devices", "--json"}, 20s);
  ASSERT_TRUE(outcome.status.success()) << outcome.stderr_text;
  const auto json = nlohmann::json::parse(outcome.stdout_text);
  EXPECT_EQ(json["count"], 2);
  EXPECT_EQ(json["counted_by"], "the CUDA driver");
  EXPECT_EQ(json["bus_ids"], (nlohmann::json{"0000:68:00.0", "0000:38:00.0"}));

  fakeMachine(0, Libraries::kNvmlAndDriver);
  outcome = runFor({"devices"}, 20s);
  ASSERT_TRUE(outcome.status.success()) << outcome.stderr_text;
  EXPECT_EQ(outcome.stdout_text,
            "no CUDA GPU is visible to workers (CUDA_VISIBLE_DEVICES unset): NVML reports no "
            "device\n");

  outcome = runFor({"devices", "--bogus"}, 20s);
  EXPECT_EQ(outcome.status.code, 2);
  EXPECT_EQ(countOf(outcome.stderr_text, "ddprun devices: "), 1) << outcome.stderr_text;
}

// A machine without NVML or the CUDA driver: nothing counted, and --json
// says so rather than naming a driver that is not there.
TEST_F(DdprunGpuFailureTest, DevicesOnAMachineWithoutAGpuLibrarySaysNothingCounted) {
  for (const char* library : {"libcuda.so.1", "libnvidia-ml.so.1"}) {
    if (void* found = ::dlopen(library, RTLD_LAZY | RTLD_LOCAL)) {
      ::dlclose(found);
      GTEST_SKIP() << library << " is installed on this machine";
    }
  }
  const Outcome outcome = runFor({"devices", "--json"}, 20s);
  ASSERT_TRUE(outcome.status.success()) << outcome.stderr_text;
  const auto json = nlohmann::json::parse(outcome.stdout_text);
  EXPECT_EQ(json["count"], 0);
  EXPECT_EQ(json["counted_by"], "none");
  EXPECT_NE(json["why_none"].get<std::string>().find("libcuda.so.1) is not installed"),
            std::string::npos)
      << outcome.stdout_text;
}

}  // namespace
}  // namespace ddprun::launcher

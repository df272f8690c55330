// NCCL's Flight Recorder in the failure report: fake workers leave the dumps
// NCCL leaves on a timeout, where the agent armed the recorder, and ddprun
// runs torch's analyser over them. Debian's torch (1.13) has no analyser, so
// the verdict comes from a stand-in module on PYTHONPATH that prints what
// the real one prints (python/fake_flight_recorder); without it the report
// says there is no verdict, and why.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "ddprun/test_support/files.hpp"
#include "ddprun_binary_fixture.hpp"

namespace ddprun::launcher {
namespace {

namespace fs = std::filesystem;
using test_support::readFile;
using testing::DdprunBinaryTest;
using testing::Outcome;
using testing::runDir;

class DdprunFlightRecorderTest : public DdprunBinaryTest {
 protected:
  void SetUp() override {
    if (std::string(DDPRUN_TORCH_PYTHON).empty()) {
      GTEST_SKIP() << "no Python with torch was found at configure time";
    }
    extra_env_ = {{"PYTHON_EXEC", DDPRUN_TORCH_PYTHON}, {"PYTHONDONTWRITEBYTECODE", "1"}};
  }

  // Two ranks that leave a dump each; rank 1 then fails, once rank 0 has
  // written its dump (the two start together, and rank 1's failure stops
  // rank 0 wherever it is).
  Outcome runDumpingWorkers() {
    const std::string ready = dir_.path().string();
    auto args = fakeWorkers(2, {"--nccl-dump", "--ready-to", ready, "--after", ready + "/0.ready",
                                "--only-rank", "1", "--exit", "3"});
    args.insert(args.begin(), {"--log-dir", (dir_.path() / "logs").string()});
    return run(args);
  }

  fs::path attemptDir() { return runDir(dir_.path() / "logs") / "attempt_0"; }
};

TEST_F(DdprunFlightRecorderTest, TheAnalysersVerdictOnEveryRanksDumpIsInTheReport) {
  extra_env_.emplace_back("PYTHONPATH", DDPRUN_FAKE_FLIGHT_RECORDER);
  const Outcome outcome = runDumpingWorkers();
  EXPECT_EQ(outcome.status, (ExitStatus{ExitStatus::Kind::Exited, 3})) << outcome.stderr_text;
  const fs::path output = attemptDir() / "flight_recorder.txt";
  EXPECT_NE(outcome.stderr_text.find("Flight Recorder (NCCL): 2 dump(s) on this node\n"
                                     "  verdict of torch's analyser (all of it in " +
                                     output.string() +
                                     "):\n"
                                     "    Not all ranks joining collective 5 at entry 4\n"
                                     "    missing ranks: {1}\n"
                                     "    dumps read: nccl_trace_rank_0 nccl_trace_rank_1\n"),
            std::string::npos)
      << outcome.stderr_text;
  EXPECT_NE(readFile(output).find("missing ranks: {1}"), std::string::npos);
  // Gathered, the workers' own dumps left where NCCL wrote them.
  EXPECT_TRUE(fs::exists(attemptDir() / "flight_recorder" / "nccl_trace_rank_0"));
  EXPECT_TRUE(fs::exists(attemptDir() / "1" / "nccl_trace_rank_1"));
}

TEST_F(DdprunFlightRecorderTest, WithoutTheAnalyserTheReportSaysThereIsNoVerdictAndWhy) {
  const Outcome outcome = runDumpingWorkers();
  EXPECT_EQ(outcome.status, (ExitStatus{ExitStatus::Kind::Exited, 3})) << outcome.stderr_text;
  EXPECT_NE(outcome.stderr_text.find("Flight Recorder (NCCL): 2 dump(s) on this node\n"
                                     "  no verdict: torch's analyser "
                                     "(torch.distributed.flight_recorder.fr_trace, torch 2.5 and "
                                     "later) is not installed for this Python\n"),
            std::string::npos)
      << outcome.stderr_text;
}

TEST_F(DdprunFlightRecorderTest, AFailureWithoutDumpsRunsNoAnalyser) {
  extra_env_.emplace_back("PYTHONPATH", DDPRUN_FAKE_FLIGHT_RECORDER);
  auto args = fakeWorkers(2, {"--only-rank", "1", "--exit", "3"});
  args.insert(args.begin(), {"--log-dir", (dir_.path() / "logs").string()});
  const Outcome outcome = run(args);
  EXPECT_EQ(outcome.status, (ExitStatus{ExitStatus::Kind::Exited, 3})) << outcome.stderr_text;
  EXPECT_EQ(outcome.stderr_text.find("Flight Recorder"), std::string::npos) << outcome.stderr_text;
  EXPECT_FALSE(fs::exists(attemptDir() / "flight_recorder.txt"));
}

}  // namespace
}  // namespace ddprun::launcher

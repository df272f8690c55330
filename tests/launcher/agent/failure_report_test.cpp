// The failure table's reading of a worker's error file, which the worker
// controls: a value nesting a million levels, fields of the wrong type and a
// FIFO at the path give "(unreadable error file)" or the value's text, never
// a crash, a throw or a hang of the agent that prints it.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <functional>
#include <string>
#include <thread>

#include "ddprun/launcher/agent/agent.hpp"
#include "ddprun/test_support/temp_dir.hpp"

namespace ddprun::launcher {
namespace {

using namespace std::chrono_literals;

class FailureReportTest : public ::testing::Test {
 protected:
  // The report of one failed worker whose error file is `path_`.
  std::string report() const {
    RunResult result;
    result.exit_code = 1;
    WorkerFailure failure;
    failure.status = {ExitStatus::Kind::Exited, 1};
    failure.error_file = path_.string();
    result.failures.push_back(failure);
    return formatFailureReport(result, "host0", "train");
  }

  // Writes the report in a child process, so that a crash or a hang fails
  // this test instead of ending or stalling the suite: "" when the child
  // wrote it and exited 0 within 10 s, else what happened.
  std::string reportInChild(const std::function<bool(const std::string&)>& check) const {
    const pid_t child = ::fork();
    if (child == 0) {
      ::_exit(check(report()) ? 0 : 1);
    }
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    int status = 0;
    while (::waitpid(child, &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > deadline) {
        ::kill(child, SIGKILL);
        ::waitpid(child, &status, 0);
        return "still writing the report after 10 s";
      }
      std::this_thread::sleep_for(5ms);  // polling the child, not waiting a fixed time
    }
    if (WIFSIGNALED(status)) {
      return "killed by signal " + std::to_string(WTERMSIG(status));
    }
    return WEXITSTATUS(status) == 0 ? "" : "the report is not as expected";
  }

  static bool saysUnreadable(const std::string& report) {
    return report.find("traceback : (unreadable error file)") != std::string::npos;
  }

  test_support::TempDir dir_{"ddprun-failure-report-test"};
  std::filesystem::path path_ = dir_ / "error.json";
};

// The Flight Recorder's dumps beside the error file, where the agent asked
// NCCL to put them, are listed with the failure.
TEST_F(FailureReportTest, NcclFlightRecorderDumpsAreListed) {
  std::ofstream(dir_ / "nccl_trace_rank_3") << "dump";
  std::ofstream(dir_ / "stdout.log") << "not a dump";
  const std::string text = report();
  EXPECT_NE(text.find("  nccl      : Flight Recorder dump " +
                      (dir_ / "nccl_trace_rank_3").string() + "\n"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("stdout.log"), std::string::npos) << text;
}

TEST_F(FailureReportTest, AMessageNestingAMillionLevelsIsUnreadableNotACrash) {
  std::ofstream(path_) << R"({"message":)" << std::string(1'000'000, '[')
                       << std::string(1'000'000, ']') << "}";
  EXPECT_EQ(reportInChild(saysUnreadable), "");
}

TEST_F(FailureReportTest, FieldsOfTheWrongTypeShowTheMessageAsJson) {
  std::ofstream(path_) << R"({"message":{"message":5,"extraInfo":{"py_callstack":7}}})";
  const std::string text = report();
  EXPECT_NE(text.find(R"(traceback : {"extraInfo":{"py_callstack":7},"message":5})"),
            std::string::npos)
      << text;
}

TEST_F(FailureReportTest, AFifoAtThePathIsNotWaitedOn) {
  ASSERT_EQ(::mkfifo(path_.c_str(), 0600), 0);
  EXPECT_EQ(reportInChild(saysUnreadable), "");
}

}  // namespace
}  // namespace ddprun::launcher

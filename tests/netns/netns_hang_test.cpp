// Hangs across real (namespaced) hosts, with real PyTorch workers on Gloo: a
// rank that keeps its CPU busy and stops reporting progress is seen by its
// own agent within the progress timeout, every rank's stacks on both hosts
// are taken before anything is killed, and the group restarts from its
// snapshot. And a node whose health check fails never joins.
#include <signal.h>

#include <ctime>
#include <nlohmann/json.hpp>
#include <regex>

#include "netns_job.hpp"

namespace ddprun::netns_test {
namespace {

// The first line of `text` that contains `part`, or "".
std::string lineWith(const std::string& text, const std::string& part) {
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (contains(line, part)) {
      return line;
    }
  }
  return "";
}

// The wall-clock time of an agent's log line ("[2026-11-29 02:51:10.736] ..."),
// in seconds since the epoch; nullopt if the line has none.
std::optional<double> logTime(const std::string& line) {
  std::smatch match;
  static const std::regex stamp(R"(^\[(\d{4})-(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)\.(\d{3})\])");
  if (!std::regex_search(line, match, stamp)) {
    return std::nullopt;
  }
  std::tm when{};
  when.tm_year = std::stoi(match[1]) - 1900;
  when.tm_mon = std::stoi(match[2]) - 1;
  when.tm_mday = std::stoi(match[3]);
  when.tm_hour = std::stoi(match[4]);
  when.tm_min = std::stoi(match[5]);
  when.tm_sec = std::stoi(match[6]);
  when.tm_isdst = -1;
  return static_cast<double>(std::mktime(&when)) + std::stoi(match[7]) / 1000.0;
}

// The run directory under an agent's --log-dir (one per agent).
fs::path runDirOf(const fs::path& log_dir) {
  for (const auto& entry : fs::directory_iterator(log_dir)) {
    if (entry.is_directory()) {
      return entry.path();
    }
  }
  return {};
}

class NetnsHangTest : public NetnsJobTest {
 protected:
  // Agents a (h1) and b (h2), 2 Python workers each, 4 ranks; rank 3 spins
  // at step 12 of attempt 0 without reporting it.
  void runSpinningRank(const std::string& progress_timeout, double timeout_seconds) {
    buildLab(2);
    const std::string snapshot = (dir_.path() / "snapshot").string();
    const std::vector<std::string> program = {DDPRUN_TORCH_PYTHON,
                                              PROGRESS_WORKER,
                                              snapshot,
                                              "40",
                                              "--spin-rank",
                                              "3",
                                              "--spin-step",
                                              "12"};
    const std::vector<std::string> flags = {"--max-restarts", "1",  "--progress-timeout",
                                            progress_timeout, "-t", "3"};
    Subprocess a = agent("a", "h1", "2", program, flags);
    Subprocess b = agent("b", "h2", "2", program, flags);
    const auto a_status = a.waitFor(150s);
    const auto b_status = b.waitFor(30s);
    const std::string all = logs({"a", "b"});
    ASSERT_TRUE(a_status && a_status->success()) << describe(a_status) << all;
    ASSERT_TRUE(b_status && b_status->success()) << describe(b_status) << all;

    // Rank 3 is local rank 1 of group rank 1: whichever agent that was.
    const std::string judging = "then killing it";
    const std::string judge = contains(log("a"), judging) ? "a" : "b";
    const std::string other = judge == "a" ? "b" : "a";
    const std::string hung_line = lineWith(log(judge), judging);
    EXPECT_TRUE(contains(hung_line, "local rank 1 (pid ")) << all;
    EXPECT_TRUE(contains(hung_line, "its CPU busy")) << hung_line;
    EXPECT_FALSE(contains(log(other), judging)) << "one hang, judged once: " << all;
    // The other node was asked, names the rank, and took its stacks.
    EXPECT_TRUE(contains(log(other), "says rank 3 (local rank 1 on ")) << all;

    // Every rank's stacks on both hosts, before anything was killed.
    for (const std::string& name : {judge, other}) {
      const fs::path run = runDirOf(dirOf(name) / "logs");
      for (const char* local_rank : {"0", "1"}) {
        const fs::path stack = run / "attempt_0" / local_rank / "stack.txt";
        ASSERT_TRUE(fs::exists(stack)) << stack << all;
        const std::string text = readFile(stack);
        EXPECT_TRUE(contains(text, "eu-stack -p ") && contains(text, "TID ")) << stack << text;
      }
    }
    const fs::path judge_run = runDirOf(dirOf(judge) / "logs");
    // The spinning rank printed its Python stack as it was stopped.
    EXPECT_TRUE(contains(readFile(judge_run / "attempt_0" / "1" / "stderr.log"),
                         "in spin_without_progress"))
        << readFile(judge_run / "attempt_0" / "1" / "stderr.log");

    // The judging node's timeline names the hung rank and where the stacks are.
    const std::string timeline = readFile(judge_run / "timeline.json");
    EXPECT_TRUE(contains(timeline, "\"worker hung\"") && contains(timeline, "\"rank\":3"))
        << timeline;

    // Stopped within the timeout plus 2 s of its last report.
    std::string last_report;
    std::istringstream progress(
        readFile(judge_run / "progress" / "attempt_0.local_rank_1.progress.jsonl"));
    for (std::string line; std::getline(progress, line);) {
      last_report = line;
    }
    ASSERT_FALSE(last_report.empty());
    const double reported = nlohmann::json::parse(last_report).at("wall").get<double>();
    const auto restarted = logTime(lineWith(log(judge), "restarting the worker group (attempt 1)"));
    ASSERT_TRUE(restarted) << log(judge);
    const double stopped_after = *restarted - reported;
    report("stopped_after_last_progress_ms", static_cast<long>(stopped_after * 1000));
    EXPECT_LT(stopped_after, timeout_seconds + 2.0) << all;

    // Both groups resumed from the snapshot (rank 0 saves every 5 steps).
    for (const std::string& name : {judge, other}) {
      const std::string resumed = lineWith(log(name), "attempt 1: starting at step");
      EXPECT_TRUE(contains(resumed, "starting at step 11")) << resumed << all;
    }
  }
};

TEST_F(NetnsHangTest, ABusyRankWithoutProgressIsStoppedWithEveryStackAndResumes) {
  runSpinningRank("4", 4.0);
}

// `auto`: the floor (3 s) is longer than five of the steps seen.
TEST_F(NetnsHangTest, TheAutomaticTimeoutFindsTheSameHang) { runSpinningRank("auto:3", 3.0); }

// A node whose health check fails never joins: the other runs the job alone
// (--nnodes 1:2), and the unfit one exits with its own status (121).
TEST_F(NetnsHangTest, ANodeThatFailsItsHealthCheckNeverJoins) {
  buildLab(2);
  const std::string out = dirOf("a").string();
  fs::create_directories(out);
  Subprocess unfit = agent("b", "h2", "1:2", {DDPRUN_FAKE_WORKER},
                           {"--health-check", "echo no GPU 3 >&2; exit 3"});
  const auto unfit_status = unfit.waitFor(60s);
  ASSERT_TRUE(unfit_status) << log("b");
  EXPECT_EQ(*unfit_status, (ExitStatus{ExitStatus::Kind::Exited, 121})) << log("b");
  EXPECT_TRUE(contains(log("b"), "no GPU 3")) << log("b");
  Subprocess fit = agent("a", "h1", "1:2", {DDPRUN_FAKE_WORKER, "--env-to", out},
                         {"--rdzv-conf", "last_call_timeout=1"});
  const auto fit_status = fit.waitFor(60s);
  ASSERT_TRUE(fit_status && fit_status->success()) << logs({"a", "b"});
  const auto env = test_support::readEnvFile(dirOf("a") / "0.env");
  EXPECT_EQ(env.at("WORLD_SIZE"), "2") << "the unfit node never joined";
}

}  // namespace
}  // namespace ddprun::netns_test

// `ddprun status`'s tables: aligned columns, durations for humans, and what
// each part of a job's status says.
#include "ddprun/launcher/observe/status_table.hpp"

#include <gtest/gtest.h>

namespace ddprun::launcher {
namespace {

namespace protocol = proto::rendezvous;
using protocol::JobState;
using protocol::MemberState;

protocol::JobStatus runningJob() {
  protocol::JobStatus job;
  job.run_id = "job7";
  job.state = JobState::kRunning;
  job.round = 2;
  job.since_round_ms = 2300;
  job.world_size = 6;
  job.min_nodes = 1;
  job.max_nodes = 3;
  job.members = {{"node0:10", "node0", 0, 0, 4, MemberState::kRunning, true, 20, 1, 3},
                 {"node1:11", "node1", 1, 4, 2, MemberState::kStarting, true, 1200, 0, 3}};
  job.restarts_used = 1;
  job.restarts_left = 2;
  job.last_failure =
      protocol::FailureStatus{"node0:10",
                              "node0",
                              {1, 3, 3, 999, std::nullopt, 11, "killed by SIGSEGV (signal 11)"},
                              false,
                              4000};
  job.losses = {{"node2:12", "node2", 0, true, protocol::LossReason::kNoHeartbeat, 61'000}};
  return job;
}

TEST(StatusTable, ColumnsAreAlignedWithoutTrailingBlanks) {
  EXPECT_EQ(alignColumns({{"A", "BB", "C"}, {"long", "x", ""}}), "A     BB  C\nlong  x\n");
}

// Agents and workers name themselves: what they sent must not reach the
// terminal as escape sequences.
TEST(StatusTable, ControlCharactersAreShownEscaped) {
  protocol::JobStatus job = runningJob();
  job.run_id = "job\x1b[2J";
  job.members[0].agent = "node0\x1b]0;owned\x07";
  job.last_failure->failure.reason = "bad\r\nline\x7f";
  const std::string text = formatJobStatus(job, "node0:29400");
  EXPECT_EQ(text.find('\x1b'), std::string::npos) << text;
  EXPECT_EQ(text.find('\x07'), std::string::npos) << text;
  EXPECT_EQ(text.find('\r'), std::string::npos) << text;
  EXPECT_EQ(text.find('\x7f'), std::string::npos) << text;
  EXPECT_NE(text.find("rendezvous 'job\\x1b[2J'"), std::string::npos) << text;
  EXPECT_NE(text.find("node0\\x1b]0;owned\\x07"), std::string::npos) << text;
  EXPECT_NE(text.find("bad\\x0d\\x0aline\\x7f"), std::string::npos) << text;
  protocol::JobSummary summary;
  summary.run_id = "r\x1b";
  EXPECT_NE(formatJobList({summary}, "h:1").find("r\\x1b "), std::string::npos);
}

// Text a terminal would reorder (a bidi override or isolate) or obey (a C1
// control) is shown escaped too, by the same rule as the log and metrics;
// ordinary UTF-8 is left alone.
TEST(StatusTable, BidiOverridesC1ControlsAndInvalidUtf8AreShownEscaped) {
  protocol::JobStatus job = runningJob();
  job.run_id = "job\xe2\x80\xaegpj";
  job.members[0].agent = "node0\xe2\x81\xa6:10";
  job.members[0].host =
      "n\xc2\x9b"
      "31m";
  job.last_failure->failure.reason = "caf\xc3\xa9 \xff";
  const std::string text = formatJobStatus(job, "node0:29400");
  EXPECT_EQ(text.find("\xe2\x80\xae"), std::string::npos) << text;
  EXPECT_EQ(text.find("\xe2\x81\xa6"), std::string::npos) << text;
  EXPECT_EQ(text.find("\xc2\x9b"), std::string::npos) << text;
  EXPECT_NE(text.find("rendezvous 'job\\u202egpj'"), std::string::npos) << text;
  EXPECT_NE(text.find("node0\\u2066:10  n\\u009b31m"), std::string::npos) << text;
  EXPECT_NE(text.find("caf\xc3\xa9 \\xff"), std::string::npos) << text;
  protocol::JobSummary summary;
  summary.run_id = "r\xe2\x80\xae";
  EXPECT_NE(formatJobList({summary}, "h:1").find("r\\u202e  "), std::string::npos);
}

TEST(StatusTable, DurationsReadAsAPersonWouldSayThem) {
  EXPECT_EQ(describeDuration(-5), "0 ms");
  EXPECT_EQ(describeDuration(850), "850 ms");
  EXPECT_EQ(describeDuration(4230), "4.2 s");
  EXPECT_EQ(describeDuration(185'000), "3 min 5 s");
  EXPECT_EQ(describeDuration(7'620'000), "2 h 7 min");
}

TEST(StatusTable, AJobShowsItsRoundMembersRestartsFailureAndLosses) {
  const std::string text = formatJobStatus(runningJob(), "node0:29400");
  EXPECT_NE(text.find("rendezvous 'job7' at node0:29400 (ddprund)\n"), std::string::npos) << text;
  EXPECT_NE(text.find("round:         2, decided 2.3 s ago\n"), std::string::npos) << text;
  EXPECT_NE(text.find("nodes:         2 (--nnodes 1:3), world size 6\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("restarts:      1 used, 2 left\n"), std::string::npos) << text;
  EXPECT_NE(text.find("last failure:  rank 3 (local rank 3, pid 999) on node0 (node0:10), round "
                      "1: killed by SIGSEGV (signal 11), 4.0 s ago\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("NODE  AGENT     HOST   RANKS  STATE     RESTARTS  HEARD\n"
                      "0     node0:10  node0  0-3    running   1/3       20 ms ago\n"
                      "1     node1:11  node1  4-5    starting  0/3       1.2 s ago\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("spares: none\n"), std::string::npos) << text;
  EXPECT_NE(text.find("node2:12  node2  0      1 min 1 s ago  no heartbeat within the keep-alive "
                      "timeout\n"),
            std::string::npos)
      << text;
}

TEST(StatusTable, AWaitingJobSaysWhatItWaitsFor) {
  protocol::JobStatus job = runningJob();
  job.state = JobState::kSuspended;
  job.round = 3;
  job.members.front().node_rank.reset();
  job.members.front().base_rank.reset();
  job.members.front().state = MemberState::kWaiting;
  job.members.front().max_restarts.reset();
  job.members.front().connected = false;
  job.members.pop_back();
  job.rendezvous_host = "node0:10";
  const std::string text = formatJobStatus(job, "node0:29400");
  EXPECT_NE(text.find("(the agent node0:10, embedded)"), std::string::npos) << text;
  EXPECT_NE(text.find("state:         suspended"), std::string::npos) << text;
  EXPECT_NE(text.find("round:         3 (not decided yet; the last one was 2.3 s ago)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("-     node0:10  node0  -      waiting, disconnected  1         20 ms ago"),
            std::string::npos)
      << text;
}

TEST(StatusTable, TheJobListHasOneLinePerJob) {
  EXPECT_EQ(formatJobList({}, "h:1"), "no c10d rendezvous runs at h:1\n");
  EXPECT_EQ(formatJobList({{"job7", JobState::kRunning, 1, 2, 1, 4, 900},
                           {"other", JobState::kForming, 0, 1, 0, 0, std::nullopt}},
                          "h:1"),
            "RUN ID  STATE    ROUND  NODES  SPARES  WORLD  LAST ROUND\n"
            "job7    running  1      2      1       4      900 ms ago\n"
            "other   forming  0      1      0       0      -\n");
}

// A rendezvous that holds more runs than it lists says how many: the
// table's last line.
TEST(StatusTable, ACappedJobListSaysHowManyRunsAreHeld) {
  const std::vector<protocol::JobSummary> listed = {{"job7", JobState::kRunning, 1, 2, 1, 4, 900}};
  EXPECT_EQ(formatJobList(listed, "h:1", 52000),
            "RUN ID  STATE    ROUND  NODES  SPARES  WORLD  LAST ROUND\n"
            "job7    running  1      2      1       4      900 ms ago\n"
            "(1 of the 52000 runs it holds, open ones first: --rdzv-id ID shows any one)\n");
  EXPECT_EQ(formatJobList(listed, "h:1", 1).find("runs it holds"), std::string::npos);
}

TEST(StatusTable, AQuarantinedHostIsListedAndItsSpareMarked) {
  protocol::JobStatus job = runningJob();
  EXPECT_NE(formatJobStatus(job, "node0:29400").find("quarantined:   none\n"), std::string::npos);
  job.spares = {
      {"node2:13", "node2", std::nullopt, std::nullopt, 2, MemberState::kSpare, true, 40, 2, 3}};
  job.quarantined = {{"node2", 2, 185'000}};
  const std::string text = formatJobStatus(job, "node0:29400");
  EXPECT_NE(text.find("quarantined:   node2 (2 group failure(s) started there; 3 min 5 s left)\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("spare, quarantined"), std::string::npos) << text;
}

}  // namespace
}  // namespace ddprun::launcher

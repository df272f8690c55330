// The answers to `ddprun status`'s questions: a whole job, the job list and
// an error survive a round trip; optional fields may be null or missing;
// anything else is named rather than half-read.
#include "ddprun/proto/rendezvous_status.hpp"

#include <gtest/gtest.h>

#include "ddprun/proto/errors.hpp"

namespace ddprun::proto::rendezvous {
namespace {

JobStatus wholeJob() {
  JobStatus job;
  job.run_id = "job7";
  job.state = JobState::kRunning;
  job.round = 3;
  job.since_round_ms = 1500;
  job.world_size = 6;
  job.min_nodes = 1;
  job.max_nodes = 3;
  job.rendezvous_host = "node0:10";
  job.members = {{"node0:10", "node0", 0, 0, 4, MemberState::kRunning, true, 20, 1, 3},
                 {"node1:11", "node1", 1, 4, 2, MemberState::kStarting, false, 900, 0, 3}};
  job.spares = {{"node2:12", "node2", std::nullopt, std::nullopt, 2, MemberState::kSpare, true,
                 std::nullopt, 0, std::nullopt}};
  job.restarts_used = 1;
  job.restarts_left = 2;
  job.last_failure = FailureStatus{
      "node0:10", "node0", {2, 3, 3, 999, std::nullopt, 11, "killed by SIGSEGV"}, false, 4000};
  job.losses = {{"node3:13", "node3", 2, true, LossReason::kNoHeartbeat, 1600},
                {"node4:14", "node4", 1, false, LossReason::kLeft, 9000}};
  job.failed_on = "node0:10";
  job.quarantined = {{"node2", 3, 598'500}};
  return job;
}

// A capped list says how many runs are held; an older rendezvous' list,
// without the count, is every run it holds.
TEST(RendezvousStatus, ACappedJobListSaysHowManyRunsAreHeld) {
  const JobList capped = {{{"a", JobState::kRunning, 0, 2, 0, 4, 5}}, 7};
  EXPECT_EQ(decodeJobList(encodeJobList(capped)), capped);
  EXPECT_TRUE(decodeJobList(encodeJobList(capped)).capped());
  const JobList older = decodeJobList(R"({"jobs":[]})");
  EXPECT_FALSE(older.total);
  EXPECT_FALSE(older.capped());
}

TEST(RendezvousStatus, AWholeJobRoundTrips) {
  EXPECT_EQ(decodeJobStatus(encodeJobStatus(wholeJob())), wholeJob());
  JobStatus empty;
  empty.run_id = "j";
  EXPECT_EQ(decodeJobStatus(encodeJobStatus(empty)), empty);
}

TEST(RendezvousStatus, TheJobListAndErrorsRoundTrip) {
  const JobList jobs = {{{"a", JobState::kSuspended, 4, 1, 0, 0, 20},
                         {"b", JobState::kForming, 0, 1, 0, 0, std::nullopt}},
                        2};
  EXPECT_EQ(decodeJobList(encodeJobList(jobs)), jobs);
  EXPECT_FALSE(jobs.capped());
  EXPECT_TRUE(decodeJobList(encodeJobList({})).jobs.empty());
  const QueryError error{"no rendezvous 'x' here"};
  EXPECT_EQ(decodeQueryError(encodeQueryError(error)), error);
  EXPECT_FALSE(decodeQueryError(encodeJobList(jobs))) << "an answer is no error";
  EXPECT_FALSE(decodeQueryError("")) << "an older ddprund answers a query with nothing";
}

// What a rendezvous may leave out (optional fields, the loss list) is
// optional here too, so a newer or older daemon's answer still prints.
TEST(RendezvousStatus, OptionalFieldsMayBeMissing) {
  const JobStatus job = decodeJobStatus(R"({"run_id":"j","state":"forming","round":0,
      "world_size":0,"min_nodes":2,"max_nodes":2,"members":[{"agent":"h:1",
      "local_world_size":2,"state":"waiting"}],"spares":[],"future_field":1})");
  ASSERT_EQ(job.members.size(), 1u);
  EXPECT_EQ(job.members[0].host, "h");
  EXPECT_FALSE(job.members[0].node_rank);
  EXPECT_FALSE(job.since_round_ms);
  EXPECT_FALSE(job.last_failure);
  EXPECT_TRUE(job.losses.empty());
  EXPECT_TRUE(job.quarantined.empty()) << "an older rendezvous quarantines nobody";
}

TEST(RendezvousStatus, MalformedAnswersThrowNamingThem) {
  EXPECT_THROW(decodeJobStatus(""), StoreError);
  EXPECT_THROW(decodeJobStatus("[]"), StoreError);
  EXPECT_THROW(decodeJobStatus(R"({"run_id":"j"})"), StoreError);
  try {
    decodeJobStatus(R"({"run_id":"j","state":"dancing","round":0,"world_size":0,
        "min_nodes":1,"max_nodes":1,"members":[],"spares":[]})");
    FAIL();
  } catch (const StoreError& error) {
    EXPECT_NE(std::string(error.what()).find("dancing"), std::string::npos) << error.what();
  }
  EXPECT_THROW(decodeJobList(R"({"jobs":[{"run_id":"a"}]})"), StoreError);
}

// The answer is the daemon's bytes: a field nesting 100,000 levels (one a
// newer daemon might add, and so ignored) is refused as it is read, before
// `ddprun status` could copy or print it.
TEST(RendezvousStatus, AnAnswerNestingPastTheBoundIsRefused) {
  const std::string deep = std::string(100'000, '[') + std::string(100'000, ']');
  EXPECT_THROW(decodeJobStatus(R"({"run_id":"j","state":"forming","round":0,"world_size":0,
      "min_nodes":2,"max_nodes":2,"members":[],"spares":[],"future_field":)" +
                               deep + "}"),
               StoreError);
  EXPECT_THROW(decodeJobList(R"({"jobs":[],"future_field":)" + deep + "}"), StoreError);
}

TEST(RendezvousStatus, QuestionsAndHosts) {
  EXPECT_EQ(statusQuestion("job7"), "status/job7");
  EXPECT_EQ(statusRunOf("status/job7"), "job7");
  EXPECT_FALSE(statusRunOf("jobs"));
  EXPECT_EQ(queryKey(statusQuestion("job7")), "ddprun/query/status/job7");
  EXPECT_EQ(agentHost("gpu-01.cluster:4242"), "gpu-01.cluster");
  EXPECT_EQ(agentHost("agent-without-pid"), "agent-without-pid");
  EXPECT_EQ(agentHost("host:"), "host:");
  EXPECT_EQ(agentHost("a:b"), "a:b");
}

}  // namespace
}  // namespace ddprun::proto::rendezvous

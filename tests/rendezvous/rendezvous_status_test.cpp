// The status questions (`jobs`, `status/<run id>`) through a real ddprund
// server on loopback, with scripted agents: members with their ranks and
// restarts, spares, lost agents with the reason, the round re-formed, the
// last failure an agent reported, older agents' plain values, and the
// bound on what is remembered.
#include "ddprun/proto/rendezvous_status.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>

#include "ddprun/proto/errors.hpp"
#include "ddprun/proto/rendezvous_protocol.hpp"
#include "ddprun/rendezvous/client.hpp"
#include "ddprun/rendezvous/job_record.hpp"
#include "ddprun/rendezvous/server.hpp"
#include "ddprun/test_support/eventually.hpp"
#include "test_agent.hpp"

namespace ddprun::rdzv {
namespace {

using namespace std::chrono_literals;
namespace protocol = proto::rendezvous;
using protocol::EventType;
using protocol::JobState;
using protocol::JobStatus;
using protocol::LossReason;
using protocol::MemberState;
using protocol::Verb;
using testing::JoinSpec;
using testing::TestAgent;

class RendezvousStatusTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = testing::startLoopbackServer();
    asker_ = std::make_unique<StoreClient>("127.0.0.1", server_->port(), 10s);
  }

  TestAgent agent(const std::string& id, const std::string& run = "job7") {
    return TestAgent(server_->port(), run, id);
  }

  std::string ask(const std::string& question) {
    return asker_->query(protocol::queryKey(question));
  }
  JobStatus status(const std::string& run = "job7") {
    return protocol::decodeJobStatus(ask(protocol::statusQuestion(run)));
  }
  // Polls the status until `holds` is true of it; the last status seen.
  JobStatus statusWhen(const std::function<bool(const JobStatus&)>& holds) {
    JobStatus seen;
    test_support::eventually(
        [&] {
          seen = status();
          return holds(seen);
        },
        10s);
    return seen;
  }

  std::unique_ptr<Server> server_;
  std::unique_ptr<StoreClient> asker_;
};

std::string report(const std::string& agent, int restarts_used,
                   const protocol::WorkerFailureReport& failure) {
  return protocol::encodeAgentReport({agent, restarts_used, failure});
}

protocol::WorkerFailureReport exited(std::int64_t round, int rank, int code) {
  return {round,
          rank,
          rank % 2,
          4000 + rank,
          code,
          std::nullopt,
          "exited with code " + std::to_string(code)};
}

TEST_F(RendezvousStatusTest, JobsListsEveryRunTheRendezvousHolds) {
  EXPECT_TRUE(protocol::decodeJobList(ask(std::string(protocol::kQueryJobs))).jobs.empty());
  TestAgent a = agent("node-a:11", "alpha");
  TestAgent b = agent("node-b:12", "beta");
  a.join({1, 1, 2});
  b.join({2, 2, 3});
  ASSERT_EQ(a.nextEvent().type, EventType::kRound);
  const std::int64_t keys = asker_->numKeys();  // the agents' events
  const auto jobs = protocol::decodeJobList(ask(std::string(protocol::kQueryJobs))).jobs;
  status("alpha");
  EXPECT_EQ(asker_->numKeys(), keys) << "asking stores nothing";
  ASSERT_EQ(jobs.size(), 2u);
  EXPECT_EQ(jobs[0].run_id, "alpha");
  EXPECT_EQ(jobs[0].state, JobState::kRunning);
  EXPECT_EQ(jobs[0].members, 1);
  EXPECT_EQ(jobs[0].world_size, 2);
  EXPECT_TRUE(jobs[0].since_round_ms.has_value());
  EXPECT_EQ(jobs[1].run_id, "beta");
  EXPECT_EQ(jobs[1].state, JobState::kForming) << "one of two nodes";
  EXPECT_EQ(jobs[1].members, 1);
  EXPECT_FALSE(jobs[1].since_round_ms.has_value());
}

// A run id is bytes of a client's key; invalid UTF-8 in one must not end
// the daemon when a status question echoes it.
TEST_F(RendezvousStatusTest, ARunIdThatIsNotUtf8IsListedAndTheDaemonServesOthers) {
  const std::string run = "r\xff";
  TestAgent a = agent("node-a:11", run);
  a.join({1, 1, 2});
  ASSERT_EQ(a.nextEvent().type, EventType::kRound);
  const auto jobs = protocol::decodeJobList(ask(std::string(protocol::kQueryJobs))).jobs;
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_EQ(jobs[0].run_id, "r\xEF\xBF\xBD") << "the invalid byte is written as U+FFFD";
  EXPECT_EQ(status(run).run_id, "r\xEF\xBF\xBD");
  EXPECT_EQ(jobs[0].members, 1);
  StoreClient other("127.0.0.1", server_->port(), 10s);
  other.set("plain", "1");
  EXPECT_EQ(other.get("plain"), "1");
}

TEST_F(RendezvousStatusTest, MembersComeWithTheirRanksAndRestartsAndSparesStandBy) {
  TestAgent a = agent("node-a:11");
  TestAgent b = agent("node-b:12");
  TestAgent c = agent("node-c:13");
  a.join({1, 2, 2, 30'000, 60'000, 3});
  b.join({1, 2, 3, 30'000, 60'000, 3, 1});
  c.join({1, 2, 1, 30'000, 60'000, 2});
  ASSERT_EQ(a.nextEvent().type, EventType::kRound);
  ASSERT_EQ(b.nextEvent().type, EventType::kRound);
  const JobStatus job = status();
  EXPECT_EQ(job.run_id, "job7");
  EXPECT_EQ(job.state, JobState::kRunning);
  EXPECT_EQ(job.round, 0);
  EXPECT_EQ(job.world_size, 5);
  EXPECT_EQ(job.min_nodes, 1);
  EXPECT_EQ(job.max_nodes, 2);
  EXPECT_EQ(job.rendezvous_host, "") << "a ddprund of its own";
  ASSERT_EQ(job.members.size(), 2u);
  EXPECT_EQ(job.members[0].agent, "node-a:11");
  EXPECT_EQ(job.members[0].host, "node-a");
  EXPECT_EQ(job.members[0].node_rank, 0);
  EXPECT_EQ(job.members[0].base_rank, 0);
  EXPECT_EQ(job.members[0].local_world_size, 2);
  EXPECT_EQ(job.members[0].state, MemberState::kRunning);
  EXPECT_TRUE(job.members[0].connected);
  ASSERT_TRUE(job.members[0].heard_ms);
  EXPECT_GE(*job.members[0].heard_ms, 0);
  EXPECT_EQ(job.members[0].max_restarts, 3);
  EXPECT_EQ(job.members[1].node_rank, 1);
  EXPECT_EQ(job.members[1].base_rank, 2);
  EXPECT_EQ(job.members[1].restarts_used, 1);
  ASSERT_EQ(job.spares.size(), 1u);
  EXPECT_EQ(job.spares[0].agent, "node-c:13");
  EXPECT_EQ(job.spares[0].state, MemberState::kSpare);
  EXPECT_FALSE(job.spares[0].node_rank);
  EXPECT_EQ(job.restarts_left, 2) << "b has used 1 of its 3";
  EXPECT_TRUE(job.losses.empty());
  EXPECT_FALSE(job.last_failure);
}

TEST_F(RendezvousStatusTest, ALostMemberIsShownWithItsReasonAndTheRoundReforms) {
  TestAgent a = agent("node-a:11");
  TestAgent b = agent("node-b:12");
  a.join({1, 2});
  b.join({1, 2});
  ASSERT_EQ(a.nextEvent().round, 0);
  b.disconnect();
  const JobStatus job = statusWhen([](const JobStatus& s) { return s.round == 1; });
  EXPECT_EQ(job.state, JobState::kRunning);
  ASSERT_EQ(job.members.size(), 1u);
  EXPECT_EQ(job.members[0].agent, "node-a:11");
  EXPECT_EQ(job.world_size, 2);
  ASSERT_EQ(job.losses.size(), 1u);
  EXPECT_EQ(job.losses[0].agent, "node-b:12");
  EXPECT_EQ(job.losses[0].host, "node-b");
  EXPECT_EQ(job.losses[0].round, 0);
  EXPECT_TRUE(job.losses[0].was_member);
  EXPECT_EQ(job.losses[0].reason, LossReason::kConnectionClosed);
  ASSERT_TRUE(job.since_round_ms);
  EXPECT_LE(*job.since_round_ms, job.losses[0].ago_ms) << "the round came after the loss";
}

TEST_F(RendezvousStatusTest, AnAgentThatLeavesOrFallsSilentIsLostForThatReason) {
  TestAgent a = agent("node-a:11");
  TestAgent b = agent("node-b:12");
  TestAgent c = agent("node-c:13");
  const JoinSpec short_keep_alive{1, 3, 1, 0, 300};
  a.join(short_keep_alive);
  b.join(short_keep_alive);
  c.join(short_keep_alive);
  c.send(Verb::kLeave);
  // a keeps beating; b falls silent and is lost after the keep-alive timeout.
  const JobStatus job = statusWhen([&](const JobStatus& s) {
    a.send(Verb::kHeartbeat);
    return s.losses.size() == 2;
  });
  ASSERT_EQ(job.losses.size(), 2u);
  EXPECT_EQ(job.losses[0].agent, "node-b:12") << "newest first";
  EXPECT_EQ(job.losses[0].reason, LossReason::kNoHeartbeat);
  EXPECT_EQ(job.losses[1].agent, "node-c:13");
  EXPECT_EQ(job.losses[1].reason, LossReason::kLeft);
  ASSERT_EQ(job.members.size(), 1u);
  EXPECT_EQ(job.members[0].agent, "node-a:11");
}

TEST_F(RendezvousStatusTest, RestartsAndTheLastFailureComeFromTheAgentsReports) {
  TestAgent a = agent("node-a:11");
  TestAgent b = agent("node-b:12");
  a.join({2, 2, 2, 30'000, 60'000, 2});
  b.join({2, 2, 2, 30'000, 60'000, 2});
  const auto round = a.nextEvent();
  ASSERT_EQ(round.type, EventType::kRound);
  EXPECT_TRUE(round.reports) << "the round says reports are taken";
  b.send(Verb::kRestart, report("node-b:12", 1, exited(0, 3, 7)));
  b.sync();
  JobStatus job = status();
  EXPECT_EQ(job.round, 1);
  EXPECT_EQ(job.restarts_used, 1);
  EXPECT_EQ(job.restarts_left, 1) << "b has 1 of 2 left";
  EXPECT_EQ(job.members[1].restarts_used, 1);
  ASSERT_TRUE(job.last_failure);
  EXPECT_EQ(job.last_failure->agent, "node-b:12");
  EXPECT_EQ(job.last_failure->host, "node-b");
  EXPECT_EQ(job.last_failure->failure, exited(0, 3, 7));
  EXPECT_FALSE(job.last_failure->ended_job);
  // A second report of round 0 (a peer's worker failing as a consequence)
  // does not replace its root cause.
  a.send(Verb::kRestart, report("node-a:11", 1, exited(0, 0, 1)));
  a.sync();
  EXPECT_EQ(status().last_failure->agent, "node-b:12");
  protocol::WorkerFailureReport killed{2, 1, 1, 4242, std::nullopt, 9, "killed by SIGKILL"};
  a.send(Verb::kAbort, report("node-a:11", 2, killed));
  a.sync();
  job = status();
  EXPECT_EQ(job.state, JobState::kFailed);
  EXPECT_EQ(job.failed_on, "node-a:11");
  ASSERT_TRUE(job.last_failure);
  EXPECT_EQ(job.last_failure->failure, killed);
  EXPECT_TRUE(job.last_failure->ended_job);
  EXPECT_EQ(job.members[0].state, MemberState::kEnded);
}

// Agents of an earlier ddprun send their id alone with every verb and no
// restart counts in their join: still served, their restarts counted here.
TEST_F(RendezvousStatusTest, OlderAgentsPlainValuesAreStillAccepted) {
  TestAgent a = agent("node-a:11");
  TestAgent b = agent("node-b:12");
  a.join({2, 2});
  b.join({2, 2});
  ASSERT_EQ(a.nextEvent().type, EventType::kRound);
  b.send(Verb::kRestart);
  b.sync();
  JobStatus job = status();
  EXPECT_EQ(job.round, 1);
  EXPECT_EQ(job.restarts_used, 1);
  EXPECT_EQ(job.members[1].restarts_used, 1);
  EXPECT_FALSE(job.members[1].max_restarts);
  EXPECT_FALSE(job.restarts_left);
  EXPECT_FALSE(job.last_failure);
  b.send(Verb::kAbort);
  b.sync();
  job = status();
  EXPECT_EQ(job.state, JobState::kFailed);
  EXPECT_EQ(job.failed_on, "node-b:12");
}

// A report speaks for the agent it names: only that agent's lease may send
// it, as with a plain value.
TEST_F(RendezvousStatusTest, AReportForAnotherAgentOrMalformedClosesOnlyThatConnection) {
  TestAgent a = agent("node-a:11");
  TestAgent b = agent("node-b:12");
  a.join({2, 2});
  b.join({2, 2});
  ASSERT_EQ(a.nextEvent().type, EventType::kRound);
  b.send(Verb::kRestart, report("node-a:11", 1, exited(0, 0, 1)));
  EXPECT_THROW(b.sync(), Error);
  TestAgent c = agent("node-c:13", "other");
  c.join({1, 1});
  c.send(Verb::kRestart, R"({"restarts_used": 1})");
  EXPECT_THROW(c.sync(), Error);
  a.sync();  // served on
  EXPECT_EQ(status().restarts_used, 0);
}

TEST_F(RendezvousStatusTest, AnUnknownRunIdOrQuestionIsAnErrorNamingIt) {
  TestAgent a = agent("node-a:11", "alpha");
  a.join({1, 1});
  const auto error = protocol::decodeQueryError(ask(protocol::statusQuestion("beta")));
  ASSERT_TRUE(error);
  EXPECT_NE(error->error.find("'beta'"), std::string::npos) << error->error;
  const auto unknown = protocol::decodeQueryError(ask("weather"));
  ASSERT_TRUE(unknown);
  EXPECT_NE(unknown->error.find("'weather'"), std::string::npos) << unknown->error;
  EXPECT_THROW(protocol::decodeJobStatus(ask(protocol::statusQuestion("beta"))), StoreError);
}

TEST_F(RendezvousStatusTest, OnlyTheLastLossesAreKept) {
  TestAgent member = agent("node-m:1");
  member.join({1, 1});
  const auto total = static_cast<int>(JobRecord::kMaxLosses) + 4;
  for (int i = 0; i < total; ++i) {
    TestAgent spare = agent("spare:" + std::to_string(100 + i));
    spare.join({1, 1});
    spare.disconnect();
    ASSERT_TRUE(test_support::eventually(
        [&] {
          const JobStatus job = status();
          return !job.losses.empty() && job.losses.front().agent == spare.id();
        },
        10s));
  }
  const JobStatus job = status();
  ASSERT_EQ(job.losses.size(), JobRecord::kMaxLosses);
  EXPECT_EQ(job.losses.front().agent, "spare:" + std::to_string(100 + total - 1));
  EXPECT_FALSE(job.losses.front().was_member);
  EXPECT_EQ(job.losses.back().agent, "spare:" + std::to_string(100 + total - 16));
}

// A host whose workers failed first quarantine_after times stands by: its
// agent is told so with the failures and the time left, a peer's restart of
// a round already re-formed changes nothing, the status lists the host, and
// another agent of that host joins as a quarantined spare.
TEST_F(RendezvousStatusTest, AQuarantinedHostStandsByAndItsEventAndTheStatusSaySo) {
  const JoinSpec spec{2, 3, 2, 30'000, 60'000, 3, 0, 2};
  TestAgent a = agent("node-a:11");
  TestAgent b = agent("node-b:12");
  TestAgent c = agent("node-c:13");
  for (TestAgent* each : {&a, &b, &c}) {
    each->join(spec);
  }
  for (TestAgent* each : {&a, &b, &c}) {
    ASSERT_EQ(each->nextEvent().round, 0) << each->id();
  }
  c.send(Verb::kRestart, report("node-c:13", 1, exited(0, 4, 3)));
  for (TestAgent* each : {&a, &b, &c}) {
    ASSERT_EQ(each->nextEvent().round, 1) << each->id();
  }
  // b's workers failed in round 0 too, in turn: that round is over.
  b.send(Verb::kRestart, report("node-b:12", 1, exited(0, 2, 1)));
  b.sync();
  EXPECT_EQ(status().round, 1) << "a failure seen twice re-formed the round twice";
  c.send(Verb::kRestart, report("node-c:13", 2, exited(1, 4, 3)));
  const protocol::Event told = c.nextEvent();
  EXPECT_EQ(told.type, EventType::kSpare);
  EXPECT_EQ(told.round, 2);
  ASSERT_TRUE(told.quarantine.has_value());
  EXPECT_EQ(told.quarantine->host, "node-c");
  EXPECT_EQ(told.quarantine->failures, 2);
  EXPECT_GT(told.quarantine->left_ms, 590'000);
  EXPECT_LE(told.quarantine->left_ms, 600'000);
  for (TestAgent* each : {&a, &b}) {
    const protocol::Event round = each->nextEvent();
    EXPECT_EQ(round.round, 2) << each->id();
    EXPECT_EQ(round.group_world_size, 2) << each->id();
  }
  const JobStatus job = status();
  EXPECT_EQ(job.state, JobState::kRunning);
  ASSERT_EQ(job.quarantined.size(), 1u);
  EXPECT_EQ(job.quarantined[0].host, "node-c");
  EXPECT_EQ(job.quarantined[0].failures, 2);
  ASSERT_EQ(job.spares.size(), 1u);
  EXPECT_EQ(job.spares[0].agent, "node-c:13");
  // The agent restarted on that host: a spare at once, saying why.
  c.disconnect();
  TestAgent c2 = agent("node-c:14");
  c2.join(spec);
  const protocol::Event again = c2.nextEvent();
  EXPECT_EQ(again.type, EventType::kSpare);
  ASSERT_TRUE(again.quarantine.has_value());
  EXPECT_EQ(again.quarantine->failures, 2);
  EXPECT_EQ(status().round, 2) << "a quarantined host's agent restarted the job";
}

}  // namespace
}  // namespace ddprun::rdzv

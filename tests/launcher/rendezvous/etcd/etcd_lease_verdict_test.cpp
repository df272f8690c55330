// How a survivor judges another agent's lease from etcd's readings, and whom
// it watches: pure functions, no etcd. The rule under test: revoke only when
// etcd says the lease went unrenewed for its agent's declared TTL (a reading
// of 0 on a lease granted TTL + 1), never on a lease without the margin.
#include "ddprun/launcher/etcd/etcd_lease_verdict.hpp"

#include <gtest/gtest.h>

namespace ddprun::launcher::etcd_rdzv {
namespace {

using namespace std::chrono_literals;
using Kind = LeaseStep::Kind;
using Reading = etcd::Client::LeaseTime;

TEST(EtcdLeaseVerdict, LeasesOfTwoSecondsOrMoreGetASecondsMargin) {
  EXPECT_EQ(grantedLeaseTtl(1s), 1s);
  EXPECT_EQ(declaredLeaseTtl(1s), 0);
  EXPECT_EQ(grantedLeaseTtl(2s), 3s);
  EXPECT_EQ(declaredLeaseTtl(2s), 2);
  EXPECT_EQ(grantedLeaseTtl(15s), 16s);
}

TEST(EtcdLeaseVerdict, ZeroLeftOnALeaseWithTheMarginIsARevocation) {
  EXPECT_EQ(judgeLease(Reading{0, 3}, 2).kind, Kind::kRevoke);
  EXPECT_EQ(judgeLease(Reading{-1, 3}, 2).kind, Kind::kRevoke);
}

TEST(EtcdLeaseVerdict, OneSecondLeftIsWatchedClosely) {
  const LeaseStep step = judgeLease(Reading{1, 3}, 2);
  EXPECT_EQ(step.kind, Kind::kAskAgain);
  EXPECT_EQ(step.after, kCloseWatchInterval);
}

TEST(EtcdLeaseVerdict, MoreLeftIsAskedAgainBeforeItCanReachOne) {
  const LeaseStep two = judgeLease(Reading{2, 3}, 2);
  EXPECT_EQ(two.kind, Kind::kAskAgain);
  EXPECT_EQ(two.after, 1s);
  EXPECT_EQ(judgeLease(Reading{15, 16}, 15).after, 14s);
}

TEST(EtcdLeaseVerdict, ALeaseWithoutTheMarginOrGoneIsNeverJudged) {
  EXPECT_EQ(judgeLease(std::nullopt, 2).kind, Kind::kForget);
  EXPECT_EQ(judgeLease(Reading{0, 2}, 2).kind, Kind::kForget) << "granted without the margin";
  EXPECT_EQ(judgeLease(Reading{0, 5}, 2).kind, Kind::kForget) << "etcd raised the TTL";
  EXPECT_EQ(judgeLease(Reading{0, 1}, 0).kind, Kind::kForget) << "an agent that declared none";
}

class LeasesToWatchTest : public ::testing::Test {
 protected:
  // Members a, b, c, d registered in that order, each on its own lease
  // 100 + n with a declared TTL of 2 s; `coordinator` holds the election key.
  void SetUp() override {
    std::int64_t revision = 10;
    for (const char* agent : {"a", "b", "c", "d"}) {
      member(agent, ++revision, 2);
    }
  }

  void member(const std::string& agent, std::int64_t revision, std::int64_t declared) {
    MemberRecord record;
    record.id = agent;
    record.store_host = "h";
    record.store_port = 1;
    record.lease_ttl_s = declared;
    const std::int64_t lease = 100 + (agent[0] - 'a');
    snapshot_[keys_.member(agent)] = {keys_.member(agent), encode(record), revision, revision,
                                      lease};
  }

  void elect(const std::string& agent) {
    const std::int64_t lease = 100 + (agent[0] - 'a');
    snapshot_[keys_.coordinator()] = {keys_.coordinator(), agent, 50, 50, lease};
  }

  std::vector<std::string> watchedBy(const std::string& agent) {
    std::vector<std::string> agents;
    for (const WatchedLease& lease : leasesToWatch(snapshot_, keys_, agent)) {
      agents.push_back(lease.agent);
    }
    return agents;
  }

  Keys keys_{"/p", "run"};
  std::map<std::string, etcd::KeyValue> snapshot_;
};

TEST_F(LeasesToWatchTest, TheCoordinatorWatchesEveryOtherMember) {
  elect("b");
  EXPECT_EQ(watchedBy("b"), (std::vector<std::string>{"a", "c", "d"}));
  const auto leases = leasesToWatch(snapshot_, keys_, "b");
  EXPECT_EQ(leases.front().key, keys_.member("a"));
  EXPECT_EQ(leases.front().lease, 100);
  EXPECT_EQ(leases.front().declared_ttl_s, 2);
}

TEST_F(LeasesToWatchTest, TheFirstTwoOtherMembersWatchTheCoordinatorsElectionKey) {
  elect("b");
  EXPECT_EQ(watchedBy("a"), (std::vector<std::string>{"b"}));
  EXPECT_EQ(watchedBy("c"), (std::vector<std::string>{"b"}));
  EXPECT_TRUE(watchedBy("d").empty());
  const auto leases = leasesToWatch(snapshot_, keys_, "a");
  ASSERT_EQ(leases.size(), 1u);
  EXPECT_EQ(leases.front().key, keys_.coordinator());
  EXPECT_EQ(leases.front().create_revision, 50);
  EXPECT_EQ(leases.front().lease, 101);
}

TEST_F(LeasesToWatchTest, NoElectionOrNoDeclaredTtlMeansNothingToWatch) {
  EXPECT_TRUE(watchedBy("a").empty());
  member("c", 13, 0);  // an agent from before the margin
  elect("b");
  EXPECT_EQ(watchedBy("b"), (std::vector<std::string>{"a", "d"}));
}

TEST_F(LeasesToWatchTest, ALeaseStandsOnlyWhileItsKeyIsTheSame) {
  elect("b");
  const WatchedLease a = leasesToWatch(snapshot_, keys_, "b").front();
  EXPECT_TRUE(stillStands(snapshot_, a));
  member("a", 60, 2);  // registered again (same lease id here, a newer key)
  EXPECT_FALSE(stillStands(snapshot_, a));
  snapshot_.erase(keys_.member("a"));
  EXPECT_FALSE(stillStands(snapshot_, a));
}

}  // namespace
}  // namespace ddprun::launcher::etcd_rdzv

// The exit barrier, socket-free: it is due once every member of the running
// round has reported, once, and only members' reports count.
#include "ddprun/rendezvous/exit_barrier.hpp"

#include <gtest/gtest.h>

namespace ddprun::rdzv {
namespace {

using namespace std::chrono_literals;
using Clock = ElasticRendezvous::Clock;

const Clock::time_point kStart{};

// A rendezvous whose first round, of `ids`, is complete.
ElasticRendezvous completeRound(const std::vector<std::string>& ids) {
  ElasticSettings settings;
  settings.min_nodes = static_cast<int>(ids.size());
  settings.max_nodes = settings.min_nodes;
  ElasticRendezvous rdzv(settings);
  Events events;
  for (const std::string& id : ids) {
    rdzv.join({id, 1, std::nullopt, -1}, kStart, events);
  }
  return rdzv;
}

TEST(ExitBarrierTest, DueOnceWhenEveryMemberReported) {
  ElasticRendezvous rdzv = completeRound({"a", "b"});
  ASSERT_TRUE(rdzv.complete());
  ExitBarrier barrier;
  EXPECT_FALSE(barrier.due(rdzv));
  barrier.record("a", rdzv.round(), rdzv);
  EXPECT_FALSE(barrier.due(rdzv));
  barrier.record("a", rdzv.round(), rdzv);  // twice counts once
  EXPECT_FALSE(barrier.due(rdzv));
  barrier.record("b", rdzv.round(), rdzv);
  EXPECT_EQ(barrier.due(rdzv), rdzv.round());
  EXPECT_FALSE(barrier.due(rdzv)) << "told twice";
  EXPECT_TRUE(barrier.reported("b", rdzv.round()));
  EXPECT_FALSE(barrier.reported("b", rdzv.round() + 1));
}

// A spare's report (a rejoin whose workers were done) is no member's.
TEST(ExitBarrierTest, OnlyMembersReportsCount) {
  ElasticRendezvous rdzv = completeRound({"a", "b"});
  Events events;
  ASSERT_EQ(rdzv.join({"s", 1, std::nullopt, -1}, kStart, events), JoinStatus::kSpare);
  ExitBarrier barrier;
  barrier.record("s", rdzv.round(), rdzv);
  barrier.record("a", rdzv.round(), rdzv);
  EXPECT_FALSE(barrier.due(rdzv)) << "a spare stood in for b";
  barrier.record("b", rdzv.round(), rdzv);
  EXPECT_EQ(barrier.due(rdzv), rdzv.round());
}

// Reports that came before the round was complete count when it is; a
// report of another round starts afresh.
TEST(ExitBarrierTest, ReportsBeforeCompletionCountAndANewRoundStartsAfresh) {
  ElasticSettings settings;
  settings.min_nodes = 2;
  settings.max_nodes = 2;
  ElasticRendezvous rdzv(settings);
  Events events;
  ExitBarrier barrier;
  rdzv.rejoin({"a", 1, std::nullopt, -1}, {3, 0, 2}, kStart, events);
  barrier.record("a", 3, rdzv);
  barrier.record("b", 2, rdzv);  // an older round's
  barrier.record("a", 3, rdzv);
  EXPECT_FALSE(barrier.due(rdzv));
  rdzv.rejoin({"b", 1, std::nullopt, -1}, {3, 1, 2}, kStart, events);
  ASSERT_TRUE(rdzv.complete());
  EXPECT_FALSE(barrier.due(rdzv)) << "b's report was for round 2";
  barrier.record("b", 3, rdzv);
  EXPECT_EQ(barrier.due(rdzv), 3);
}

}  // namespace
}  // namespace ddprun::rdzv

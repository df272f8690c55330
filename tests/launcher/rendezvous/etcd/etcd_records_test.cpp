// The etcd backend's keys and records: round trips, and that a foreign or
// corrupt value is refused (never half-read) so a coordinator ignores it.
#include "ddprun/launcher/etcd/etcd_records.hpp"

#include <gtest/gtest.h>

namespace ddprun::launcher::etcd_rdzv {
namespace {

TEST(EtcdRecords, KeysLiveUnderThePrefixAndTheRunId) {
  const Keys keys("/ddprun/rendezvous", "job7");
  EXPECT_EQ(keys.member("h1:42"), "/ddprun/rendezvous/job7/members/h1:42");
  EXPECT_EQ(keys.state(), "/ddprun/rendezvous/job7/state");
  EXPECT_EQ(Keys("/custom/", "j").closed(), "/custom/j/closed");
  EXPECT_TRUE(keys.restart("a").starts_with(keys.restarts()));
  EXPECT_TRUE(keys.done("a").starts_with(keys.dones()));
}

TEST(EtcdRecords, RecordsRoundTrip) {
  const MemberRecord member{"h1:42", 4, 1, 3, "10.0.0.1", 41000};
  EXPECT_EQ(decodeMember(encode(member)), member);
  const MemberRecord no_hint{"h2:7", 2, std::nullopt, -1, "h2", 1};
  EXPECT_EQ(decodeMember(encode(no_hint)), no_hint);
  EXPECT_EQ(encode(no_hint).find("lease_ttl_s"), std::string::npos)
      << "a lease without the margin is written as an older agent wrote it";
  const MemberRecord judged{"h3:9", 2, std::nullopt, -1, "h3", 1, 2};
  EXPECT_EQ(decodeMember(encode(judged)), judged);
  const StateRecord state{
      5, false, true, 6, {{"a", 0, 0, 4, "10.0.0.1", 41000}, {"b", 1, 4, 2, "b", 9}}};
  EXPECT_EQ(decodeState(encode(state)), state);
  ASSERT_NE(state.find("b"), nullptr);
  EXPECT_EQ(state.find("b")->base_rank, 4);
  EXPECT_EQ(state.find("c"), nullptr);
  const StateRecord suspended{6, true, false, 0, {}};
  EXPECT_EQ(decodeState(encode(suspended)), suspended);
  StateRecord quarantining = state;
  quarantining.quarantined = {{"h3", 2, 599'000}};
  EXPECT_EQ(decodeState(encode(quarantining)), quarantining);
  ASSERT_NE(quarantining.quarantineOf("h3"), nullptr);
  EXPECT_EQ(quarantining.quarantineOf("h3")->failures, 2);
  EXPECT_EQ(quarantining.quarantineOf("h1"), nullptr);
  EXPECT_EQ(encode(state).find("quarantined"), std::string::npos)
      << "an older agent reads what it always read";
  const ClosedRecord closed{true, "h1:42"};
  EXPECT_EQ(decodeClosed(encode(closed)), closed);
  EXPECT_EQ(decodeRound(encodeRound(12)), 12);
}

TEST(EtcdRecords, ForeignOrCorruptValuesAreRefused) {
  for (const std::string text : {"", "not json", "[1,2]", "{}", R"({"round":"x"})",
                                 R"({"id":"a","local_world_size":"four","last_round":0,)"
                                 R"("store_host":"h","store_port":1})",
                                 R"({"id":"a","local_world_size":1,"last_round":0,)"
                                 R"("store_host":"h","store_port":70000})"}) {
    EXPECT_FALSE(decodeMember(text)) << text;
    EXPECT_FALSE(decodeState(text)) << text;
    EXPECT_FALSE(decodeClosed(text)) << text;
    EXPECT_FALSE(decodeRound(text)) << text;
  }
}

}  // namespace
}  // namespace ddprun::launcher::etcd_rdzv

// rdzv_scale's checks of what the simulated agents were told: a right round
// passes whatever order the agents are in, and each kind of wrong one is
// named.
#include "round_check.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace ddprun::bench {
namespace {

using proto::rendezvous::Event;
using proto::rendezvous::EventType;

constexpr int kAgents = 5;
constexpr int kLocal = 2;

// Agent i holds group rank (3 i) mod 5 in round 7, then (2 i) mod 5 in
// round 8; each announced its own store, and every event names node 0's.
std::vector<AgentRecord> twoRounds() {
  std::vector<AgentRecord> agents(kAgents);
  for (int i = 0; i < kAgents; ++i) {
    agents[i].id = "host" + std::to_string(i) + ":1";
    agents[i].store_host = "10.0.0." + std::to_string(i);
    agents[i].store_port = static_cast<std::uint16_t>(2000 + i);
  }
  for (const auto& [round, step] : {std::pair{7, 3}, std::pair{8, 2}}) {
    const int node0 = [&] {
      for (int i = 0; i < kAgents; ++i) {
        if (step * i % kAgents == 0) {
          return i;
        }
      }
      return -1;
    }();
    for (int i = 0; i < kAgents; ++i) {
      Event event;
      event.type = EventType::kRound;
      event.round = round;
      event.group_rank = step * i % kAgents;
      event.group_world_size = kAgents;
      event.local_world_size = kLocal;
      event.base_rank = event.group_rank * kLocal;
      event.world_size = kAgents * kLocal;
      event.store_host = agents[static_cast<std::size_t>(node0)].store_host;
      event.store_port = agents[static_cast<std::size_t>(node0)].store_port;
      agents[static_cast<std::size_t>(i)].rounds.push_back(event);
    }
  }
  return agents;
}

const std::vector<std::size_t> kAll{0, 1, 2, 3, 4};

// The first round alone, as the agents hold it before the second.
std::vector<AgentRecord> firstRound() {
  auto agents = twoRounds();
  for (auto& agent : agents) {
    agent.rounds.pop_back();
  }
  return agents;
}

std::string problem(const std::vector<AgentRecord>& agents, std::size_t index) {
  return checkRound(agents, kAll, index, kLocal).value_or("");
}

TEST(RoundCheckTest, RightRoundsPass) {
  EXPECT_EQ(problem(firstRound(), 0), "");
  EXPECT_EQ(problem(twoRounds(), 1), "");
}

TEST(RoundCheckTest, TwoAgentsWithOneRankAreNamed) {
  auto agents = firstRound();
  agents[4].rounds[0].group_rank = agents[1].rounds[0].group_rank;
  agents[4].rounds[0].base_rank = agents[1].rounds[0].base_rank;
  EXPECT_NE(problem(agents, 0).find("agents host1:1 and host4:1 were both given group rank 3"),
            std::string::npos)
      << problem(agents, 0);
}

TEST(RoundCheckTest, AStoreThatIsNotNodeZerosIsNamed) {
  auto agents = firstRound();
  agents[2].rounds[0].store_port = 1;
  EXPECT_NE(problem(agents, 0).find("agent host2:1 was told the store 10.0.0.0:1"),
            std::string::npos)
      << problem(agents, 0);
}

TEST(RoundCheckTest, WrongSizesAreNamed) {
  auto agents = firstRound();
  agents[3].rounds[0].group_world_size = 4;
  EXPECT_NE(problem(agents, 0).find("group world size 4, expected 5"), std::string::npos);
  agents = firstRound();
  agents[3].rounds[0].world_size = 5;
  EXPECT_NE(problem(agents, 0).find("world size 5, local world size 2"), std::string::npos);
  agents = firstRound();
  agents[3].rounds[0].base_rank += 1;
  EXPECT_NE(problem(agents, 0).find("do not fit group rank"), std::string::npos);
}

TEST(RoundCheckTest, AMissingOrExtraEventIsNamed) {
  EXPECT_NE(problem(twoRounds(), 0).find("agent host0:1 read 2 round events where 1 were due"),
            std::string::npos)
      << problem(twoRounds(), 0);
  auto agents = twoRounds();
  agents[3].rounds.pop_back();
  EXPECT_NE(problem(agents, 1).find("agent host3:1 read 1 round events where 2 were due"),
            std::string::npos)
      << problem(agents, 1);
}

TEST(RoundCheckTest, RoundNumbersMustAgreeAndMoveOn) {
  auto agents = twoRounds();
  agents[2].rounds[1].round = 9;
  EXPECT_NE(problem(agents, 1).find("told round 9 while others were told 8"), std::string::npos)
      << problem(agents, 1);
  agents = twoRounds();
  for (auto& agent : agents) {
    agent.rounds[1].round = 7;
  }
  EXPECT_NE(problem(agents, 1).find("round 7 does not follow round 7"), std::string::npos)
      << problem(agents, 1);
}

TEST(RoundCheckTest, AnAgentHostingTheRendezvousIsNamed) {
  auto agents = firstRound();
  agents[0].rounds[0].rendezvous_host = "host0:1";
  EXPECT_NE(problem(agents, 0).find("names 'host0:1' as the rendezvous host"), std::string::npos)
      << problem(agents, 0);
}

TEST(RoundCheckTest, OnlyTheHoldersAreChecked) {
  auto agents = twoRounds();
  agents[4].rounds.pop_back();  // lost before the second round
  for (std::size_t i = 0; i < 4; ++i) {
    auto& event = agents[i].rounds[1];
    event.group_world_size = 4;
    event.world_size = 4 * kLocal;
  }
  // The second round's ranks less agent 4's (3) are 0, 2, 4, 1: agent 2
  // takes rank 3 instead of 4, so 0..3 remain, each once.
  agents[2].rounds[1].group_rank = 3;
  agents[2].rounds[1].base_rank = 3 * kLocal;
  EXPECT_EQ(checkRound(agents, {0, 1, 2, 3}, 1, kLocal).value_or(""), "");
  EXPECT_NE(checkRound(agents, kAll, 1, kLocal).value_or(""), "");
}

}  // namespace
}  // namespace ddprun::bench

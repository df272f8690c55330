#include "round_check.hpp"

namespace ddprun::bench {
namespace {

using proto::rendezvous::Event;

std::string storeOf(const std::string& host, std::uint16_t port) {
  return host + ":" + std::to_string(port);
}

// The problem with one holder's event, against the round's shape.
std::optional<std::string> checkEvent(const AgentRecord& agent, const Event& event,
                                      std::int64_t round, int members, int local_world_size) {
  const std::string who = "agent " + agent.id + " (round " + std::to_string(event.round) + ")";
  if (event.round != round) {
    return who + ": told round " + std::to_string(event.round) + " while others were told " +
           std::to_string(round);
  }
  if (event.group_rank < 0 || event.group_rank >= members) {
    return who + ": group rank " + std::to_string(event.group_rank) + " outside 0.." +
           std::to_string(members - 1);
  }
  if (event.group_world_size != members) {
    return who + ": group world size " + std::to_string(event.group_world_size) + ", expected " +
           std::to_string(members);
  }
  if (event.world_size != members * local_world_size ||
      event.local_world_size != local_world_size ||
      event.base_rank != event.group_rank * local_world_size) {
    return who + ": world size " + std::to_string(event.world_size) + ", local world size " +
           std::to_string(event.local_world_size) + ", base rank " +
           std::to_string(event.base_rank) + " do not fit group rank " +
           std::to_string(event.group_rank) + " of " + std::to_string(members);
  }
  if (!event.rendezvous_host.empty()) {
    return who + ": names '" + event.rendezvous_host + "' as the rendezvous host (a ddprund)";
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::string> checkRound(const std::vector<AgentRecord>& agents,
                                      const std::vector<std::size_t>& holders, std::size_t index,
                                      int local_world_size) {
  if (holders.empty()) {
    return "round " + std::to_string(index) + ": no agent to check";
  }
  const int members = static_cast<int>(holders.size());
  std::vector<const AgentRecord*> by_rank(holders.size(), nullptr);
  std::int64_t round = -1;
  for (const std::size_t i : holders) {
    const AgentRecord& agent = agents[i];
    if (agent.rounds.size() != index + 1) {
      return "agent " + agent.id + " read " + std::to_string(agent.rounds.size()) +
             " round events where " + std::to_string(index + 1) + " were due";
    }
    const Event& event = agent.rounds[index];
    if (round < 0) {
      round = event.round;
      if (index > 0 && round <= agent.rounds[index - 1].round) {
        return "agent " + agent.id + ": round " + std::to_string(round) +
               " does not follow round " + std::to_string(agent.rounds[index - 1].round);
      }
    }
    if (auto problem = checkEvent(agent, event, round, members, local_world_size)) {
      return problem;
    }
    const auto rank = static_cast<std::size_t>(event.group_rank);
    if (by_rank[rank] != nullptr) {
      return "agents " + by_rank[rank]->id + " and " + agent.id + " were both given group rank " +
             std::to_string(rank) + " of round " + std::to_string(round);
    }
    by_rank[rank] = &agent;
  }
  const AgentRecord& node0 = *by_rank.front();
  const std::string store = storeOf(node0.store_host, node0.store_port);
  for (const std::size_t i : holders) {
    const Event& event = agents[i].rounds[index];
    if (storeOf(event.store_host, event.store_port) != store) {
      return "agent " + agents[i].id + " was told the store " +
             storeOf(event.store_host, event.store_port) + ", but node 0 (" + node0.id +
             ") announced " + store;
    }
  }
  return std::nullopt;
}

}  // namespace ddprun::bench

// The correctness checks of rdzv_scale: what the simulated agents were told
// against what a rendezvous must tell them. Pure functions over records.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ddprun/proto/rendezvous_protocol.hpp"

namespace ddprun::bench {

// One simulated agent: what it announced in its join, and every round event
// it read, in order.
struct AgentRecord {
  std::string id;
  std::string store_host;
  std::uint16_t store_port = 0;
  std::vector<proto::rendezvous::Event> rounds;
};

// Checks the `index`-th round (0: the first) as its `holders` (indices into
// `agents`) read it: each read exactly index + 1 round events; all name the
// same round, newer than the one before; group ranks are 0..M-1 once each
// (M = holders), the group world size M, the world size M x
// `local_world_size`, base ranks in order, the workers' store the one that
// group rank 0 announced, and no agent hosts the rendezvous. The first
// problem, in one line; nullopt when all is right.
std::optional<std::string> checkRound(const std::vector<AgentRecord>& agents,
                                      const std::vector<std::size_t>& holders, std::size_t index,
                                      int local_world_size);

}  // namespace ddprun::bench

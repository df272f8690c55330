// One run's exit barrier: which agents reported their workers of a round
// done, and whether every member of the running round has. Owned by the
// RendezvousService's run and driven, like it, under the store lock.
//
// Counted, not rescanned: the members of a round cannot change while it
// stays complete under the same number (ElasticRendezvous starts a new round
// for every change), so the reports of members are counted once when the
// round is first checked and then one by one as they come. Each report is
// O(1); the barrier never walks the members.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>

#include "ddprun/rendezvous/elastic_rendezvous.hpp"
#include "ddprun/rendezvous/key_space.hpp"

namespace ddprun::rdzv {

class ExitBarrier {
 public:
  // `agent`'s workers of `round` succeeded. A report for another round than
  // the last one's starts the barrier afresh for that round.
  void record(std::string_view agent, std::int64_t round, const ElasticRendezvous& rdzv);
  // Whether `agent` reported its workers of `round` done.
  bool reported(std::string_view agent, std::int64_t round) const;
  // The round whose members must now be told "finished": the running round
  // once all of its members have reported, once. nullopt otherwise.
  std::optional<std::int64_t> due(const ElasticRendezvous& rdzv);

 private:
  std::int64_t round_ = -1;  // the round the reports are for
  std::unordered_set<std::string, StringHash, std::equal_to<>> done_;
  // How many of done_ are members of round_, valid once `counted_`: the round
  // was complete when counted, so its members stay as they were.
  std::size_t done_members_ = 0;
  bool counted_ = false;
  std::int64_t finished_round_ = -1;  // the last round told "finished"
};

}  // namespace ddprun::rdzv

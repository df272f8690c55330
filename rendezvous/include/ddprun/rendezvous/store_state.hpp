// All of a server's stored data: named key spaces (one per job, or per job
// attempt; the default space is ""), and the memory budget they share.
// Socket-free and not thread-safe: the server holds its store lock around
// every call.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "ddprun/rendezvous/key_space.hpp"

namespace ddprun::rdzv {

class StoreState {
 public:
  // `max_bytes`: what every space together may hold; `max_reply_bytes`: the
  // most one reply may carry (MemoryBudget).
  explicit StoreState(ClientSink& sink, std::size_t max_bytes = MemoryBudget::kUnlimited,
                      std::size_t max_reply_bytes = MemoryBudget::kUnlimited)
      : sink_(sink), budget_(max_bytes, max_reply_bytes) {}

  // The key space called `name`, created empty on first use. References stay
  // valid until dropKeySpace(name).
  KeySpace& keySpace(std::string_view name);

  // Forgets a key space and everything in it; false if there was none.
  // Clients still bound to it must have been forgotten first.
  bool dropKeySpace(std::string_view name);

  std::size_t keySpaceCount() const { return spaces_.size(); }

  // Every key space's footprint, summed.
  KeySpace::Footprint footprint() const;

  const MemoryBudget& budget() const { return budget_; }

 private:
  ClientSink& sink_;
  MemoryBudget budget_;  // outlives the spaces, which give their charge back
  StringMap<std::unique_ptr<KeySpace>> spaces_;
};

}  // namespace ddprun::rdzv

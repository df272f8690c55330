// All of a server's stored data: named key spaces (one per job, or per job
// attempt; the default space is ""). Socket-free and not thread-safe: the
// server holds its store lock around every call.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "ddprun/rendezvous/key_space.hpp"

namespace ddprun::rdzv {

class StoreState {
 public:
  explicit StoreState(ClientSink& sink) : sink_(sink) {}

  // The key space called `name`, created empty on first use. References stay
  // valid until dropKeySpace(name).
  KeySpace& keySpace(std::string_view name);

  // Forgets a key space and everything in it; false if there was none.
  // Clients still bound to it must have been forgotten first.
  bool dropKeySpace(std::string_view name);

  std::size_t keySpaceCount() const { return spaces_.size(); }

  // Every key space's footprint, summed.
  KeySpace::Footprint footprint() const;

 private:
  ClientSink& sink_;
  StringMap<std::unique_ptr<KeySpace>> spaces_;
};

}  // namespace ddprun::rdzv

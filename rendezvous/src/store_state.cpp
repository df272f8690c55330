#include "ddprun/rendezvous/store_state.hpp"

namespace ddprun::rdzv {

KeySpace& StoreState::keySpace(std::string_view name) {
  auto it = spaces_.find(name);
  if (it == spaces_.end()) {
    it = spaces_.emplace(std::string(name), std::make_unique<KeySpace>(sink_, &budget_)).first;
  }
  return *it->second;
}

bool StoreState::dropKeySpace(std::string_view name) {
  auto it = spaces_.find(name);
  if (it == spaces_.end()) {
    return false;
  }
  spaces_.erase(it);
  return true;
}

KeySpace::Footprint StoreState::footprint() const {
  KeySpace::Footprint total;
  for (const auto& [name, space] : spaces_) {
    const KeySpace::Footprint held = space->footprint();
    total.keys += held.keys;
    total.bytes += held.bytes;
    total.waiting_clients += held.waiting_clients;
  }
  return total;
}

}  // namespace ddprun::rdzv

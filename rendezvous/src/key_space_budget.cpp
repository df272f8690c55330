// KeySpace's part of the server's MemoryBudget. Every check is O(1) in the
// common case: a write whose largest possible growth (a new key) fits needs
// no lookup; only near the limit is the key looked up for its exact growth
// (a value replaced by one no larger always fits). The charge is recounted
// from counts the space keeps anyway, so no change can leak budget.
#include <string>

#include "ddprun/rendezvous/key_space.hpp"

namespace ddprun::rdzv {

std::optional<std::string> KeySpace::refuse(std::size_t growth) const {
  if (budget_ == nullptr || budget_->fits(growth)) {
    return std::nullopt;
  }
  return "it would take the store past its memory limit (--max-memory " +
         std::to_string(budget_->limit()) + " bytes: " + std::to_string(budget_->used()) +
         " held, " + std::to_string(growth) + " more asked)";
}

std::size_t KeySpace::valueGrowth(std::string_view key, std::size_t size) const {
  const auto it = values_.find(key);
  if (it == values_.end()) {
    return key.size() + size + MemoryBudget::kPerKeyBytes;
  }
  return size > it->second.size() ? size - it->second.size() : 0;
}

std::optional<std::string> KeySpace::admitValue(std::string_view key, std::size_t size) const {
  if (budget_ == nullptr || budget_->fits(key.size() + size + MemoryBudget::kPerKeyBytes)) {
    return std::nullopt;
  }
  return refuse(valueGrowth(key, size));
}

// Counted as if every key were new: only a batch that replaces keys near
// the limit is refused when it would in fact have fitted.
std::optional<std::string> KeySpace::admitValues(
    const std::vector<std::string_view>& keys, const std::vector<std::string_view>& values) const {
  std::size_t most = 0;
  for (std::size_t i = 0; i < keys.size(); ++i) {
    most += keys[i].size() + values[i].size() + MemoryBudget::kPerKeyBytes;
  }
  return refuse(most);
}

std::optional<std::string> KeySpace::admitAppend(std::string_view key, std::size_t size) const {
  const std::size_t most = key.size() + size + MemoryBudget::kPerKeyBytes;
  if (budget_ == nullptr || budget_->fits(most)) {
    return std::nullopt;
  }
  return refuse(values_.contains(key) ? size : most);
}

std::optional<std::string> KeySpace::admitQueued(std::string_view key, std::size_t size) const {
  const std::size_t item = size + MemoryBudget::kPerItemBytes;
  const std::size_t most = key.size() + item + MemoryBudget::kPerKeyBytes;
  if (budget_ == nullptr || budget_->fits(most)) {
    return std::nullopt;
  }
  return refuse(queues_.contains(key) ? item : most);
}

std::size_t KeySpace::charge() const {
  return held_bytes_ + (values_.size() + queues_.size()) * MemoryBudget::kPerKeyBytes +
         queued_items_ * MemoryBudget::kPerItemBytes;
}

void KeySpace::settle() {
  if (budget_ == nullptr) {
    return;
  }
  const std::size_t now = charge();
  budget_->remove(charged_);
  budget_->add(now);
  charged_ = now;
}

}  // namespace ddprun::rdzv

// The memory every key space of one server may hold together (ddprund
// --max-memory): the keys' names, their values and queued items, and a fixed
// charge per key and per queued item for the bookkeeping around them (a hash
// node and two string headers; a queue slot), so a flood of empty values is
// bounded as surely as one of large ones.
//
// It also bounds what one reply may carry: a MULTI_GET that names one large
// value many times over would otherwise build a reply of any size from a
// small request.
//
// Owned by the StoreState; every KeySpace of it charges it as it changes, in
// O(1). Not thread-safe: the store lock guards it, as it guards the spaces.
#pragma once

#include <algorithm>
#include <cstddef>
#include <limits>

namespace ddprun::rdzv {

class MemoryBudget {
 public:
  // What a server holds at most unless told otherwise: far above what a
  // rendezvous or a job's workers store (a few KiB per agent or rank), far
  // below what would push a host into swap or its OOM killer.
  static constexpr std::size_t kDefaultBytes = std::size_t{1} << 30;
  static constexpr std::size_t kPerKeyBytes = 96;
  static constexpr std::size_t kPerItemBytes = 32;
  static constexpr std::size_t kUnlimited = std::numeric_limits<std::size_t>::max();

  explicit MemoryBudget(std::size_t limit = kUnlimited, std::size_t max_reply = kUnlimited)
      : limit_(limit), max_reply_(max_reply) {}

  std::size_t limit() const { return limit_; }
  std::size_t maxReply() const { return max_reply_; }
  std::size_t used() const { return used_; }
  // Whether `more` bytes fit beside what is held. The daemon's own writes
  // (rendezvous events) are charged without asking, so `used` may pass the
  // limit: then nothing more fits.
  bool fits(std::size_t more) const { return more <= limit_ - std::min(used_, limit_); }

  void add(std::size_t bytes) { used_ += bytes; }
  void remove(std::size_t bytes) { used_ -= bytes; }

 private:
  std::size_t limit_;
  std::size_t max_reply_;
  std::size_t used_ = 0;
};

}  // namespace ddprun::rdzv

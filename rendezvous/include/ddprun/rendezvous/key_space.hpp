// One store namespace: values, counters, queues, waiters and (1.13) watchers,
// with PyTorch's TCPStore semantics. Socket-free and not thread-safe: the
// server calls it with its store lock held, tests call it directly. What it
// holds is charged to its server's MemoryBudget, if it has one: a client's
// write that would take the budget past its limit is refused.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "ddprun/proto/tcpstore_codec.hpp"
#include "ddprun/rendezvous/memory_budget.hpp"

namespace ddprun::rdzv {

using ClientId = std::uint64_t;

// Receives bytes the store sends to a client other than in reply to that
// client's current request: STOP_WAITING when its WAIT completes, and 1.13
// watch notifications. Called with the store lock held; must not block.
class ClientSink {
 public:
  virtual ~ClientSink() = default;
  virtual void deliver(ClientId client, std::string_view bytes) = 0;
};

// Transparent hashing so lookups by string_view allocate nothing.
struct StringHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view text) const noexcept {
    return std::hash<std::string_view>{}(text);
  }
};

template <typename V>
using StringMap = std::unordered_map<std::string, V, StringHash, std::equal_to<>>;

class KeySpace {
 public:
  // `budget`: shared with the server's other spaces; nullptr: no limit.
  explicit KeySpace(ClientSink& sink, MemoryBudget* budget = nullptr)
      : sink_(sink), budget_(budget) {}
  ~KeySpace() { clearData(); }  // gives its charge back
  KeySpace(const KeySpace&) = delete;
  KeySpace& operator=(const KeySpace&) = delete;

  // Runs one request for `client`, appending its reply (if the command has
  // one) to `reply`. Returns a reason when the request must close the
  // connection (e.g. ADD on a non-numeric value, a write past the memory
  // budget); nothing is changed then.
  // On legacy connections a new request cancels a still-pending WAIT: 1.13
  // clients give up waiting without telling the server (docs/tcpstore-protocol.md §8.2).
  std::optional<std::string> execute(ClientId client, proto::Dialect dialect,
                                     const proto::Request& request, std::string& reply);
  // That cancel on its own, for every request of a legacy client that the
  // store does not run itself (rendezvous SETs, query GETs): any request
  // means the client stopped waiting, whoever answers it.
  void cancelLegacyWaitBefore(ClientId client, proto::Dialect dialect, proto::Command command);

  // Stores a value as a SET would, waking its waiters and watchers; for the
  // daemon's own writes (rendezvous events), which the budget never refuses.
  void publish(std::string_view key, std::string value) {
    storeValue(key, std::move(value));
    settle();
  }
  // Drops a value the daemon published (an event nobody will read again);
  // nobody is woken or notified.
  void unpublish(std::string_view key) {
    if (auto it = values_.find(key); it != values_.end()) {
      held_bytes_ -= it->first.size() + it->second.size();
      values_.erase(it);
      settle();
    }
  }

  // Drops every wait and watch registration of a client that went away.
  void forgetClient(ClientId client);

  // Forgets every value and queue (a new attempt starts on an empty store);
  // live clients' waits and watches stay registered.
  void clearData();

  bool hasPendingWait(ClientId client) const { return pending_.contains(client); }
  std::size_t numKeys() const { return values_.size(); }
  std::size_t waitingClients() const { return pending_.size(); }

  // What the space holds, for the metrics. O(1): every scrape asks under the
  // store lock, so the byte total is kept up to date by each mutation rather
  // than counted by walking millions of keys.
  struct Footprint {
    std::size_t keys = 0;   // keys holding a value, and queues
    std::size_t bytes = 0;  // their names, values and queued items
    std::size_t waiting_clients = 0;
  };
  Footprint footprint() const;

 private:
  struct PendingWait {
    std::size_t missing = 0;
    std::vector<std::string> keys;  // to unregister on cancel
  };

  using Reply = std::string;
  std::optional<std::string> run(ClientId client, proto::Dialect dialect,
                                 const proto::Request& request, std::string& reply);
  std::optional<std::string> add(std::string_view key, std::int64_t delta, Reply& reply);
  std::optional<std::string> compareSet(std::string_view key, std::string_view expected,
                                        std::string_view desired, Reply& reply);
  void set(std::string_view key, std::string_view value);
  void append(std::string_view key, std::string_view value);
  void get(std::string_view key, Reply& reply) const;
  std::optional<std::string> multiGet(const std::vector<std::string_view>& keys,
                                      Reply& reply) const;
  void check(const std::vector<std::string_view>& keys, Reply& reply) const;
  void wait(ClientId client, const std::vector<std::string_view>& keys, Reply& reply);
  void cancelWait(ClientId client);
  void deleteKey(std::string_view key, Reply& reply);
  void watchKey(ClientId client, std::string_view key, Reply& reply);
  void queuePush(std::string_view key, std::string_view value);
  void queuePop(std::string_view key, Reply& reply);
  void queueLen(std::string_view key, Reply& reply) const;
  void list(Reply& reply) const;

  bool isPresent(std::string_view key) const;
  // Counts a key's arrival for every client waiting on it (all of them, or the
  // first to complete for a queue push), sending STOP_WAITING to those done.
  void wake(std::string_view key, bool only_first_completed = false);
  void notifyWatchers(std::string_view key, proto::WatchResponse event, std::string_view old_value,
                      std::string_view new_value);
  // Stores `value` under `key`, then wakes waiters and notifies watchers.
  void storeValue(std::string_view key, std::string value);

  // The budget (key_space_budget.cpp): why a write that would add `growth`
  // bytes is refused, if it is; what a value of `size` under `key` would
  // add; and the space's charge, brought up to date after each change.
  std::optional<std::string> refuse(std::size_t growth) const;
  std::optional<std::string> admitValue(std::string_view key, std::size_t size) const;
  std::optional<std::string> admitValues(const std::vector<std::string_view>& keys,
                                         const std::vector<std::string_view>& values) const;
  std::optional<std::string> admitAppend(std::string_view key, std::size_t size) const;
  std::optional<std::string> admitQueued(std::string_view key, std::size_t size) const;
  std::size_t valueGrowth(std::string_view key, std::size_t size) const;
  std::size_t charge() const;
  void settle();

  ClientSink& sink_;
  StringMap<std::string> values_;
  StringMap<std::deque<std::string>> queues_;
  // The bytes of values_' and queues_' keys, values and items, kept by every
  // change to either (footprint()).
  std::size_t held_bytes_ = 0;
  std::size_t queued_items_ = 0;
  MemoryBudget* budget_;
  std::size_t charged_ = 0;                   // what this space has charged budget_
  StringMap<std::vector<ClientId>> waiters_;  // key -> clients, once per awaited occurrence
  std::unordered_map<ClientId, PendingWait> pending_;
  StringMap<std::vector<ClientId>> watchers_;
  std::unordered_map<ClientId, std::vector<std::string>> watched_keys_;
};

}  // namespace ddprun::rdzv

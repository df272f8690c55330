// Command semantics follow PyTorch's servers (docs/tcpstore-protocol.md §7), choosing the
// libuv behaviour where the backends differ: GET of a missing key replies
// empty, and CAS wakes waiters when it creates a key. Nothing here throws on
// a client's input; a bad request returns a reason and changes nothing.
#include "ddprun/rendezvous/key_space.hpp"

#include <algorithm>
#include <cctype>

namespace ddprun::rdzv {
namespace {

using proto::Command;
using proto::WatchResponse;

constexpr char kStopWaiting = static_cast<char>(proto::WaitResponse::StopWaiting);
constexpr char kWaitCanceled = static_cast<char>(proto::WaitResponse::WaitCanceled);

// std::stoll's rules, which every PyTorch backend applies to ADD's stored
// value: leading whitespace, an optional sign, digits up to the first
// non-digit; no digits or overflow is an error.
std::optional<std::int64_t> parseLikeStoll(std::string_view text) {
  std::size_t i = 0;
  while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i])) != 0) {
    ++i;
  }
  const bool negative = i < text.size() && text[i] == '-';
  if (i < text.size() && (text[i] == '-' || text[i] == '+')) {
    ++i;
  }
  const std::size_t first_digit = i;
  std::int64_t value = 0;
  for (; i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])) != 0; ++i) {
    const int digit = text[i] - '0';
    if (__builtin_mul_overflow(value, 10, &value) ||
        __builtin_add_overflow(value, negative ? -digit : digit, &value)) {
      return std::nullopt;
    }
  }
  if (i == first_digit) {
    return std::nullopt;
  }
  return value;
}

void eraseAll(std::vector<ClientId>& clients, ClientId client) {
  clients.erase(std::remove(clients.begin(), clients.end(), client), clients.end());
}

}  // namespace

std::optional<std::string> KeySpace::execute(ClientId client, proto::Dialect dialect,
                                             const proto::Request& request, std::string& reply) {
  auto refused = run(client, dialect, request, reply);
  settle();
  return refused;
}

std::optional<std::string> KeySpace::run(ClientId client, proto::Dialect dialect,
                                         const proto::Request& request, std::string& reply) {
  cancelLegacyWaitBefore(client, dialect, request.command);
  proto::WireWriter out(reply);
  const auto& keys = request.keys;
  const auto& values = request.values;
  switch (request.command) {
    case Command::Validate:
      return std::nullopt;
    case Command::Ping:
      out.u32(request.word);
      return std::nullopt;
    case Command::Set:
      if (auto refused = admitValue(keys[0], values[0].size())) {
        return refused;
      }
      set(keys[0], values[0]);
      return std::nullopt;
    case Command::CompareSet:
      return compareSet(keys[0], values[0], values[1], reply);
    case Command::Get:
      get(keys[0], reply);
      return std::nullopt;
    case Command::Add:
      return add(keys[0], request.number, reply);
    case Command::Check:
      check(keys, reply);
      return std::nullopt;
    case Command::Wait:
      wait(client, keys, reply);
      return std::nullopt;
    case Command::GetNumKeys:
      out.i64(static_cast<std::int64_t>(values_.size()));
      return std::nullopt;
    case Command::WatchKey:
      watchKey(client, keys[0], reply);
      return std::nullopt;
    case Command::DeleteKey:
      deleteKey(keys[0], reply);
      return std::nullopt;
    case Command::Append:
      if (auto refused = admitAppend(keys[0], values[0].size())) {
        return refused;
      }
      append(keys[0], values[0]);
      return std::nullopt;
    case Command::MultiGet:
      return multiGet(keys, reply);
    case Command::MultiSet:
      if (auto refused = admitValues(keys, values)) {
        return refused;
      }
      for (std::size_t i = 0; i < keys.size(); ++i) {
        set(keys[i], values[i]);
      }
      return std::nullopt;
    case Command::CancelWait:
      cancelWait(client);
      out.u8(static_cast<std::uint8_t>(kWaitCanceled));
      return std::nullopt;
    case Command::QueuePush:
      if (auto refused = admitQueued(keys[0], values[0].size())) {
        return refused;
      }
      queuePush(keys[0], values[0]);
      return std::nullopt;
    case Command::QueuePop:
      queuePop(keys[0], reply);
      return std::nullopt;
    case Command::QueueLen:
      queueLen(keys[0], reply);
      return std::nullopt;
    case Command::List:
      list(reply);
      return std::nullopt;
  }
  return "an unhandled command";
}

void KeySpace::cancelLegacyWaitBefore(ClientId client, proto::Dialect dialect,
                                      proto::Command command) {
  const bool legacy = dialect == proto::Dialect::Legacy113 || dialect == proto::Dialect::Legacy21;
  if (legacy && command != Command::CancelWait && pending_.contains(client)) {
    cancelWait(client);
  }
}

void KeySpace::set(std::string_view key, std::string_view value) {
  storeValue(key, std::string(value));
}

void KeySpace::storeValue(std::string_view key, std::string value) {
  auto it = values_.find(key);
  const bool created = it == values_.end();
  const bool watched = watchers_.contains(key);
  std::string old_value;
  if (created) {
    held_bytes_ += key.size() + value.size();
    it = values_.emplace(std::string(key), std::move(value)).first;
  } else {
    held_bytes_ = held_bytes_ - it->second.size() + value.size();
    if (watched) {
      old_value = std::move(it->second);
    }
    it->second = std::move(value);
  }
  if (watched) {
    notifyWatchers(key, created ? WatchResponse::KeyCreated : WatchResponse::KeyUpdated, old_value,
                   it->second);
  }
  if (created) {
    wake(key);
  }
}

std::optional<std::string> KeySpace::add(std::string_view key, std::int64_t delta, Reply& reply) {
  std::int64_t current = 0;
  if (auto it = values_.find(key); it != values_.end()) {
    const auto parsed = parseLikeStoll(it->second);
    if (!parsed) {
      return "ADD on a key whose value is not a decimal integer";
    }
    current = *parsed;
  }
  std::int64_t result = 0;
  if (__builtin_add_overflow(current, delta, &result)) {
    return "ADD overflowed a 64-bit counter";
  }
  std::string text = std::to_string(result);
  if (auto refused = admitValue(key, text.size())) {
    return refused;
  }
  storeValue(key, std::move(text));
  proto::WireWriter(reply).i64(result);
  return std::nullopt;
}

std::optional<std::string> KeySpace::compareSet(std::string_view key, std::string_view expected,
                                                std::string_view desired, Reply& reply) {
  proto::WireWriter out(reply);
  auto it = values_.find(key);
  // PyTorch's rule: an absent key is created only when `expected` is empty;
  // otherwise the caller is answered with its own `expected`.
  const bool stores = it == values_.end() ? expected.empty() : it->second == expected;
  if (stores) {
    if (auto refused = admitValue(key, desired.size())) {
      return refused;
    }
    storeValue(key, std::string(desired));
    out.bytes(desired);
    return std::nullopt;
  }
  out.bytes(it == values_.end() ? expected : std::string_view(it->second));
  return std::nullopt;
}

void KeySpace::append(std::string_view key, std::string_view value) {
  auto it = values_.find(key);
  if (it == values_.end() || watchers_.contains(key)) {
    std::string combined = it == values_.end() ? std::string() : it->second;
    combined.append(value);
    storeValue(key, std::move(combined));
    return;
  }
  held_bytes_ += value.size();
  it->second.append(value);  // existing and unwatched: nobody to wake or notify
}

void KeySpace::get(std::string_view key, Reply& reply) const {
  auto it = values_.find(key);
  proto::WireWriter(reply).bytes(it == values_.end() ? std::string_view() : it->second);
}

// A reply past the budget's bound is dropped before it grows further: it is
// built at most one value beyond the bound, never to the size asked.
std::optional<std::string> KeySpace::multiGet(const std::vector<std::string_view>& keys,
                                              Reply& reply) const {
  const std::size_t start = reply.size();
  const std::size_t most = budget_ == nullptr ? MemoryBudget::kUnlimited : budget_->maxReply();
  for (std::string_view key : keys) {
    get(key, reply);
    if (reply.size() - start > most) {
      reply.resize(start);
      return "a MULTI_GET whose reply would pass " + std::to_string(most) +
             " bytes (--max-request-bytes)";
    }
  }
  return std::nullopt;
}

bool KeySpace::isPresent(std::string_view key) const {
  if (values_.contains(key)) {
    return true;
  }
  auto queue = queues_.find(key);
  return queue != queues_.end() && !queue->second.empty();
}

void KeySpace::check(const std::vector<std::string_view>& keys, Reply& reply) const {
  const bool ready = std::all_of(keys.begin(), keys.end(),
                                 [this](std::string_view key) { return isPresent(key); });
  proto::WireWriter(reply).u8(static_cast<std::uint8_t>(ready ? proto::CheckResponse::Ready
                                                              : proto::CheckResponse::NotReady));
}

void KeySpace::wait(ClientId client, const std::vector<std::string_view>& keys, Reply& reply) {
  std::size_t missing = 0;
  for (std::string_view key : keys) {
    missing += isPresent(key) ? 0 : 1;
  }
  if (missing == 0) {
    reply.push_back(kStopWaiting);
    return;
  }
  PendingWait& pending = pending_[client];
  pending.missing += missing;
  for (std::string_view key : keys) {
    if (!isPresent(key)) {
      auto it = waiters_.find(key);
      if (it == waiters_.end()) {
        it = waiters_.emplace(std::string(key), std::vector<ClientId>{}).first;
      }
      it->second.push_back(client);
      pending.keys.emplace_back(key);
    }
  }
}

void KeySpace::wake(std::string_view key, bool only_first_completed) {
  auto it = waiters_.find(key);
  if (it == waiters_.end()) {
    return;
  }
  std::vector<ClientId>& clients = it->second;
  std::size_t counted = 0;
  while (counted < clients.size()) {
    const ClientId client = clients[counted++];
    auto pending = pending_.find(client);
    if (pending == pending_.end() || --pending->second.missing != 0) {
      continue;
    }
    pending_.erase(pending);
    sink_.deliver(client, std::string_view(&kStopWaiting, 1));
    if (only_first_completed) {
      break;
    }
  }
  clients.erase(clients.begin(), clients.begin() + static_cast<std::ptrdiff_t>(counted));
  if (clients.empty()) {
    waiters_.erase(it);
  }
}

void KeySpace::cancelWait(ClientId client) {
  auto pending = pending_.find(client);
  if (pending == pending_.end()) {
    return;
  }
  for (const std::string& key : pending->second.keys) {
    if (auto it = waiters_.find(key); it != waiters_.end()) {
      eraseAll(it->second, client);
      if (it->second.empty()) {
        waiters_.erase(it);
      }
    }
  }
  pending_.erase(pending);
}

void KeySpace::deleteKey(std::string_view key, Reply& reply) {
  auto it = values_.find(key);
  const bool existed = it != values_.end();
  if (existed) {
    std::string old_value = std::move(it->second);
    held_bytes_ -= key.size() + old_value.size();
    values_.erase(it);
    if (watchers_.contains(key)) {
      notifyWatchers(key, WatchResponse::KeyDeleted, old_value, {});
    }
  }
  // DELETE never wakes waiters (a deleted key is simply awaited again).
  proto::WireWriter(reply).i64(existed ? 1 : 0);
}

void KeySpace::watchKey(ClientId client, std::string_view key, Reply& reply) {
  auto it = watchers_.find(key);
  if (it == watchers_.end()) {
    it = watchers_.emplace(std::string(key), std::vector<ClientId>{}).first;
  }
  it->second.push_back(client);
  watched_keys_[client].emplace_back(key);
  proto::WireWriter(reply).u8(static_cast<std::uint8_t>(WatchResponse::KeyCallbackRegistered));
}

void KeySpace::notifyWatchers(std::string_view key, WatchResponse event, std::string_view old_value,
                              std::string_view new_value) {
  auto it = watchers_.find(key);
  if (it == watchers_.end()) {
    return;
  }
  std::string message;
  proto::WireWriter out(message);
  out.u8(static_cast<std::uint8_t>(event));
  out.bytes(key);
  out.bytes(old_value);
  out.bytes(new_value);
  for (ClientId watcher : it->second) {
    sink_.deliver(watcher, message);
  }
}

void KeySpace::queuePush(std::string_view key, std::string_view value) {
  auto it = queues_.find(key);
  if (it == queues_.end()) {
    it = queues_.emplace(std::string(key), std::deque<std::string>{}).first;
    held_bytes_ += key.size();
  }
  held_bytes_ += value.size();
  ++queued_items_;
  it->second.emplace_back(value);
  // One item can satisfy one popper: wake only the first waiter it completes.
  wake(key, /*only_first_completed=*/true);
}

void KeySpace::queuePop(std::string_view key, Reply& reply) {
  proto::WireWriter out(reply);
  auto it = queues_.find(key);
  const std::size_t length = it == queues_.end() ? 0 : it->second.size();
  out.i64(static_cast<std::int64_t>(length));  // the length before the pop
  if (length == 0) {
    return;
  }
  out.bytes(it->second.front());
  held_bytes_ -= it->second.front().size();
  --queued_items_;
  it->second.pop_front();
  if (it->second.empty()) {
    held_bytes_ -= key.size();
    queues_.erase(it);
  }
}

void KeySpace::queueLen(std::string_view key, Reply& reply) const {
  auto it = queues_.find(key);
  proto::WireWriter(reply).i64(
      static_cast<std::int64_t>(it == queues_.end() ? 0 : it->second.size()));
}

void KeySpace::list(Reply& reply) const {
  proto::WireWriter out(reply);
  out.i64(static_cast<std::int64_t>(values_.size()));
  for (const auto& entry : values_) {
    out.bytes(entry.first);
  }
}

KeySpace::Footprint KeySpace::footprint() const {
  return {values_.size() + queues_.size(), held_bytes_, pending_.size()};
}

void KeySpace::clearData() {
  values_.clear();
  queues_.clear();
  held_bytes_ = 0;
  queued_items_ = 0;
  settle();
}

void KeySpace::forgetClient(ClientId client) {
  cancelWait(client);
  auto watched = watched_keys_.find(client);
  if (watched == watched_keys_.end()) {
    return;
  }
  for (const std::string& key : watched->second) {
    if (auto it = watchers_.find(key); it != watchers_.end()) {
      eraseAll(it->second, client);
      if (it->second.empty()) {
        watchers_.erase(it);
      }
    }
  }
  watched_keys_.erase(watched);
}

}  // namespace ddprun::rdzv

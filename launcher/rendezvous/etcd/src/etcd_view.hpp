// This agent's copy of every key of its run in etcd, kept current by one
// watch: pushed by etcd, never polled. The rendezvous's other parts read it
// and wait on it (the agent's waits for a round, the coordinator's for a
// change to decide on).
//
// Owns the watch thread: it starts a watch from "now", then reads the prefix
// (events the read already holds are skipped); when the stream breaks (its
// member died, or lost quorum and was restarted) it does both again, on any
// member. Each
// applied batch bumps version() and wakes every waiter; `on_change` runs on
// the watch thread after each batch. Destruction cancels the watch and joins
// the thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include "ddprun/launcher/etcd/etcd_client.hpp"

namespace ddprun::launcher::etcd_rdzv {

class EtcdView {
 public:
  using Clock = std::chrono::steady_clock;
  using Snapshot = std::map<std::string, etcd::KeyValue>;

  // Starts watching and reading the prefix on the view's thread, and returns
  // at once. `retry` is how long a broken watch waits before trying again.
  EtcdView(etcd::Client& client, std::string prefix, std::chrono::milliseconds retry,
           std::function<void()> on_change);
  // Blocks until the first read is in; throws EtcdUnavailable when no member
  // served the first watch or read (the view's thread has ended then).
  void waitLoaded();
  ~EtcdView();
  EtcdView(const EtcdView&) = delete;
  EtcdView& operator=(const EtcdView&) = delete;

  // Calls `read(snapshot)` under the view's lock.
  template <typename Read>
  auto read(Read&& read) {
    std::lock_guard lock(mutex_);
    return read(std::as_const(kvs_));
  }

  // Whether `ready(snapshot)` holds (checked under the lock); if not, blocks
  // for one change at most (or until `deadline`, or a wake()) and checks
  // again. Callers loop, checking their own stop flags in between.
  bool waitUntil(const std::function<bool(const Snapshot&)>& ready, Clock::time_point deadline);
  // Blocks until the view is past revision `seen`, `deadline` passes, or a wake().
  void waitForChange(std::int64_t seen, Clock::time_point deadline);
  // Any thread: wakes every waitUntil() so it checks its own stop flags.
  void wake();
  // Whether the watch streams now; false while it is broken.
  bool watching();
  // The member (its index in the client's) the watch streams from, once the
  // read that follows its start is in; nullopt until then, and while broken.
  std::optional<std::size_t> watchedMember();
  // The etcd revision the view is current to.
  std::int64_t revision();

 private:
  void runWatch();
  void load();
  void apply(const std::vector<etcd::WatchEvent>& events, std::int64_t revision);

  etcd::Client& client_;
  std::string prefix_;
  std::chrono::milliseconds retry_;
  std::function<void()> on_change_;

  std::mutex mutex_;
  std::condition_variable changed_;
  Snapshot kvs_;
  std::int64_t revision_ = 0;
  std::int64_t base_revision_ = 0;          // the last full read's revision
  bool loaded_ = false;                     // the first full read is in
  bool watch_loaded_ = false;               // the read after the current watch started is in
  std::optional<std::string> first_error_;  // why the first watch or read failed
  bool watching_ = false;
  bool stopping_ = false;
  std::uint64_t wakes_ = 0;             // wake() calls, so a waitForChange() sees one
  std::unique_ptr<etcd::Watch> watch_;  // the open watch, for cancel()
  std::thread thread_;
};

}  // namespace ddprun::launcher::etcd_rdzv

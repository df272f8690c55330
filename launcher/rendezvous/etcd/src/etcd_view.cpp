#include "etcd_view.hpp"

#include "ddprun/launcher/core/log.hpp"

namespace ddprun::launcher::etcd_rdzv {

EtcdView::EtcdView(etcd::Client& client, std::string prefix, std::chrono::milliseconds retry,
                   std::function<void()> on_change)
    : client_(client), prefix_(std::move(prefix)), retry_(retry), on_change_(std::move(on_change)) {
  thread_ = std::thread([this] { runWatch(); });
}

void EtcdView::waitLoaded() {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [this] { return loaded_ || first_error_; });
  if (!loaded_) {
    throw etcd::EtcdUnavailable(*first_error_);  // the view's thread ends with it
  }
}

EtcdView::~EtcdView() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    if (watch_) {
      watch_->cancel();
    }
  }
  changed_.notify_all();
  thread_.join();
}

// The whole prefix, read once the watch from "now" exists: a linearizable
// read, so it holds everything up to at least the watch's start, and the
// watch everything after. (A watch from a past revision would do too, but
// etcd catches such a watcher up only every 100 ms.) A member cut off from
// its quorum cannot answer it, so a view never starts from a stale copy.
void EtcdView::load() {
  const etcd::Range range = client_.getPrefix(prefix_);
  {
    std::lock_guard lock(mutex_);
    kvs_.clear();
    for (const etcd::KeyValue& kv : range.kvs) {
      kvs_[kv.key] = kv;
    }
    base_revision_ = range.revision;
    revision_ = std::max(revision_, range.revision);
    loaded_ = true;
    watch_loaded_ = true;
  }
  changed_.notify_all();
  if (on_change_) {
    on_change_();
  }
}

// Every watch starts from "now" and is followed by a full read, at start and
// whenever the stream broke: simpler than resuming from a revision, never
// behind etcd's 100 ms catch-up, and a read costs one request.
void EtcdView::runWatch() {
  bool said_broken = false;
  for (;;) {
    {
      std::lock_guard lock(mutex_);
      if (stopping_) {
        return;
      }
      watch_ = std::make_unique<etcd::Watch>(client_, prefix_, 0);
      watching_ = true;
      watch_loaded_ = false;
    }
    try {
      if (said_broken) {
        log().info("watching etcd again at {}", client_.describe());
        said_broken = false;
      }
      watch_->run([this](const std::vector<etcd::WatchEvent>& events,
                         std::int64_t revision) { apply(events, revision); },
                  [this](std::int64_t) { load(); });
    } catch (const Error& error) {  // compaction cannot happen to a watch from now
      std::lock_guard lock(mutex_);
      if (!loaded_) {
        first_error_ = error.what();  // the constructor throws it
        watching_ = false;
        watch_.reset();
        changed_.notify_all();
        return;
      }
      if (!said_broken) {
        log().warn("the watch on etcd broke ({}); watching again", error.what());
        said_broken = true;
      }
    }
    std::unique_lock lock(mutex_);
    watching_ = false;
    watch_.reset();
    if (stopping_) {
      return;
    }
    // Not at once: a member that just failed is tried again only after a pause.
    if (said_broken) {
      changed_.wait_for(lock, retry_, [this] { return stopping_; });
    }
  }
}

// Events the last read already holds (a watch from "now" may start a little
// before it) are skipped, so no key goes back to an older value.
void EtcdView::apply(const std::vector<etcd::WatchEvent>& events, std::int64_t revision) {
  {
    std::lock_guard lock(mutex_);
    for (const etcd::WatchEvent& event : events) {
      if (event.kv.mod_revision <= base_revision_) {
        continue;
      }
      if (event.type == etcd::WatchEvent::Type::kDelete) {
        kvs_.erase(event.kv.key);
      } else {
        kvs_[event.kv.key] = event.kv;
      }
    }
    revision_ = std::max(revision_, revision);
  }
  changed_.notify_all();
  if (on_change_) {
    on_change_();
  }
}

bool EtcdView::waitUntil(const std::function<bool(const Snapshot&)>& ready,
                         Clock::time_point deadline) {
  std::unique_lock lock(mutex_);
  bool result = ready(kvs_);
  if (!result && !stopping_) {
    changed_.wait_until(lock, deadline);
    result = ready(kvs_);
  }
  return result;
}

void EtcdView::waitForChange(std::int64_t seen, Clock::time_point deadline) {
  std::unique_lock lock(mutex_);
  const std::uint64_t wakes = wakes_;
  changed_.wait_until(lock, deadline,
                      [&] { return revision_ != seen || stopping_ || wakes_ != wakes; });
}

void EtcdView::wake() {
  {
    std::lock_guard lock(mutex_);
    ++wakes_;
  }
  changed_.notify_all();
}

bool EtcdView::watching() {
  std::lock_guard lock(mutex_);
  return watching_;
}

std::optional<std::size_t> EtcdView::watchedMember() {
  std::lock_guard lock(mutex_);
  return watch_ && watch_loaded_ ? watch_->createdOn() : std::nullopt;
}

std::int64_t EtcdView::revision() {
  std::lock_guard lock(mutex_);
  return revision_;
}

}  // namespace ddprun::launcher::etcd_rdzv

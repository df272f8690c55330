#include "etcd_view.hpp"

#include "log.hpp"

namespace ddprun::launcher::etcd_rdzv {

EtcdView::EtcdView(etcd::Client& client, std::string prefix, std::chrono::milliseconds retry,
                   std::function<void()> on_change)
    : client_(client), prefix_(std::move(prefix)), retry_(retry), on_change_(std::move(on_change)) {
  resync();
  thread_ = std::thread([this] { runWatch(); });
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

// The whole prefix, read at one revision: the view starts (again) from it.
// The member's own copy will do (no quorum round trip): the watch goes on
// from the revision it was read at, so nothing after it is missed.
void EtcdView::resync() {
  const etcd::Range range = client_.getPrefix(prefix_, etcd::Client::Read::kSerializable);
  {
    std::lock_guard lock(mutex_);
    kvs_.clear();
    for (const etcd::KeyValue& kv : range.kvs) {
      kvs_[kv.key] = kv;
    }
    revision_ = range.revision;
  }
  changed_.notify_all();
  if (on_change_) {
    on_change_();
  }
}

void EtcdView::runWatch() {
  bool must_resync = false;
  bool said_broken = false;
  for (;;) {
    std::int64_t from = 0;
    {
      std::unique_lock lock(mutex_);
      if (stopping_) {
        return;
      }
      from = revision_ + 1;
    }
    try {
      if (must_resync) {
        resync();
        must_resync = false;
        continue;
      }
      {
        std::lock_guard lock(mutex_);
        if (stopping_) {
          return;
        }
        watch_ = std::make_unique<etcd::Watch>(client_, prefix_, from);
        watching_ = true;
      }
      if (said_broken) {
        log().info("watching etcd again at {}", client_.describe());
        said_broken = false;
      }
      watch_->run([this](const std::vector<etcd::WatchEvent>& events, std::int64_t revision) {
        apply(events, revision);
      });
    } catch (const etcd::WatchCompacted&) {
      must_resync = true;  // the revisions in between are gone: read it all again
    } catch (const Error& error) {
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

void EtcdView::apply(const std::vector<etcd::WatchEvent>& events, std::int64_t revision) {
  {
    std::lock_guard lock(mutex_);
    for (const etcd::WatchEvent& event : events) {
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

std::int64_t EtcdView::revision() {
  std::lock_guard lock(mutex_);
  return revision_;
}

}  // namespace ddprun::launcher::etcd_rdzv

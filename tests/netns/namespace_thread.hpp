// NamespaceThread: one thread of the test process living inside a lab host's
// network namespace, running the closures it is given in order. setns() moves
// the calling thread only, so this is how a test speaks to a lab host's
// loopback; and a process it starts there lives as long as this object (a
// child's parent-death signal follows the thread that forked it, which is
// why the thread is not a new one per call).
//
// Owns its thread; run() is called from one thread at a time and blocks until
// the closure has run there, rethrowing what it threw.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <mutex>
#include <string>
#include <thread>

namespace ddprun::netns_test {

class NamespaceThread {
 public:
  // `network_namespace`: a name `ip netns` made (/run/netns/<name>). Throws
  // std::system_error when the thread cannot enter it.
  explicit NamespaceThread(const std::string& network_namespace);
  // Runs what is queued, then joins.
  ~NamespaceThread();
  NamespaceThread(const NamespaceThread&) = delete;
  NamespaceThread& operator=(const NamespaceThread&) = delete;

  template <class F>
  auto run(F body) -> decltype(body()) {
    std::packaged_task<decltype(body())()> task(std::move(body));
    auto result = task.get_future();
    post([&task] { task(); });
    return result.get();
  }

 private:
  void post(std::function<void()> job);
  void loop(const std::string& network_namespace, std::promise<void>& entered);

  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::function<void()>> jobs_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace ddprun::netns_test

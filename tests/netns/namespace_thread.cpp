#include "namespace_thread.hpp"

#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>

namespace ddprun::netns_test {

NamespaceThread::NamespaceThread(const std::string& network_namespace) {
  std::promise<void> entered;
  std::future<void> ready = entered.get_future();
  thread_ = std::thread([this, network_namespace, &entered] { loop(network_namespace, entered); });
  try {
    ready.get();
  } catch (...) {
    thread_.join();
    throw;
  }
}

NamespaceThread::~NamespaceThread() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

void NamespaceThread::post(std::function<void()> job) {
  {
    std::lock_guard lock(mutex_);
    jobs_.push_back(std::move(job));
  }
  changed_.notify_all();
}

void NamespaceThread::loop(const std::string& network_namespace, std::promise<void>& entered) {
  const std::string path = "/run/netns/" + network_namespace;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0 || ::setns(fd, CLONE_NEWNET) != 0) {
    const int error = errno;
    if (fd >= 0) {
      ::close(fd);
    }
    entered.set_exception(std::make_exception_ptr(
        std::system_error(error, std::generic_category(), "entering " + path)));
    return;
  }
  ::close(fd);
  entered.set_value();
  for (;;) {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
    if (jobs_.empty()) {
      return;  // stopping, with nothing left to run
    }
    std::function<void()> job = std::move(jobs_.front());
    jobs_.pop_front();
    lock.unlock();
    job();
  }
}

}  // namespace ddprun::netns_test

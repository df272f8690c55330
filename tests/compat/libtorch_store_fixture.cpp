#include "libtorch_store_fixture.hpp"

#include <c10/util/Exception.h>
#include <signal.h>

#include <cstdio>
#include <cstdlib>

namespace ddprun::compat_test {

std::chrono::milliseconds expectSocketTimeout(const std::function<void()>& call) {
  const auto started = std::chrono::steady_clock::now();
  try {
    call();
    ADD_FAILURE() << "expected the call to time out, but it returned";
  } catch (const c10::Error& error) {
    // 1.13 reports an expired receive timeout as TORCH_CHECK(false, "Socket Timeout").
    EXPECT_NE(error.msg().find("Socket Timeout"), std::string::npos) << error.msg();
  }
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                               started);
}

Watchdog::Watchdog(std::chrono::milliseconds limit, std::function<void()> onExpiry)
    : thread_([this, limit, onExpiry = std::move(onExpiry)] {
        std::unique_lock lock(mutex_);
        if (!disarmed_.wait_for(lock, limit, [this] { return done_; })) {
          onExpiry();
        }
      }) {}

Watchdog::~Watchdog() {
  {
    std::lock_guard lock(mutex_);
    done_ = true;
  }
  disarmed_.notify_all();
  thread_.join();
}

void LibtorchStoreTest::SetUp() {
  daemon_.emplace(std::vector<std::string>{"--host", kHost});
  const pid_t daemon_pid = daemon_->pid();
  // No way to unblock a hung LibTorch call from outside: report, kill the
  // daemon (its own process group would outlive us) and end the process.
  watchdog_.emplace(kTestDeadline, [daemon_pid] {
    std::fprintf(stderr, "FAIL: test still running after %lld s; a store call never returned\n",
                 static_cast<long long>(kTestDeadline.count() / 1000));
    ::kill(daemon_pid, SIGKILL);
    std::_Exit(1);
  });
}

void LibtorchStoreTest::TearDown() {
  // The clients were test-body locals and are gone; a clean SIGTERM exit
  // shows that nothing they did left the daemon wedged.
  EXPECT_EQ(daemon_->stop(), 0) << "ddprund stderr:\n" << daemon_->stderrText();
  watchdog_.reset();
}

c10::intrusive_ptr<c10d::TCPStore> LibtorchStoreTest::connect(
    std::optional<std::size_t> worldSize, std::chrono::milliseconds timeout) const {
  c10d::TCPStoreOptions options;
  options.port = port();
  options.isServer = false;
  if (worldSize) {
    options.numWorkers = *worldSize;  // c10::optional, not std::optional, in 1.13
  }
  options.waitWorkers = true;
  options.timeout = timeout;
  return c10::make_intrusive<c10d::TCPStore>(kHost, options);
}

}  // namespace ddprun::compat_test

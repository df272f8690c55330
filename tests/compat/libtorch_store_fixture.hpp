// Fixture for the LibTorch compat tests: one fresh ddprund per test case, and
// LibTorch's own c10d::TCPStore client (1.13: dialect A, no handshake, plus the
// idle callback connection) pointed at it. The daemon must still stop with
// exit code 0 after every test, whatever the clients did to it.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <vector>

#include "ddprun/test_support/daemon_process.hpp"

namespace ddprun::compat_test {

using namespace std::chrono_literals;

// Bounds every blocking client call, so a server that never answers fails a
// test instead of hanging it for LibTorch's default 300 s.
inline constexpr std::chrono::milliseconds kStoreTimeout = 20s;
// Long enough to be sure a blocked call stays blocked, short enough to keep
// the suite fast.
inline constexpr std::chrono::milliseconds kShortWait = 400ms;
inline constexpr char kHost[] = "127.0.0.1";
// Per test case, everything included. 1.13's TCPStore constructor sets no
// receive timeout for its ADD "init/", so a server that never answers would
// otherwise hang the test until ctest's default 1500 s.
inline constexpr std::chrono::milliseconds kTestDeadline = 90s;

inline std::vector<std::uint8_t> bytes(const std::string& text) {
  return {text.begin(), text.end()};
}

inline std::string text(const std::vector<std::uint8_t>& value) {
  return {value.begin(), value.end()};
}

// Runs `call`, which must fail the way the 1.13 client reports an expired
// SO_RCVTIMEO. Returns how long the call took.
std::chrono::milliseconds expectSocketTimeout(const std::function<void()>& call);

// Calls `onExpiry` on its own thread unless destroyed within `limit`.
class Watchdog {
 public:
  Watchdog(std::chrono::milliseconds limit, std::function<void()> onExpiry);
  ~Watchdog();

  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

 private:
  std::mutex mutex_;
  std::condition_variable disarmed_;
  bool done_ = false;
  std::thread thread_;
};

class LibtorchStoreTest : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;

  // A client only (isServer=false). With `worldSize` set, the constructor
  // sends ADD "init/" +1, as every client made by init_process_group does.
  c10::intrusive_ptr<c10d::TCPStore> connect(
      std::optional<std::size_t> worldSize = 1,
      std::chrono::milliseconds timeout = kStoreTimeout) const;

  std::uint16_t port() const { return daemon_->port(); }

 private:
  std::optional<test_support::DaemonProcess> daemon_;
  std::optional<Watchdog> watchdog_;
};

}  // namespace ddprun::compat_test

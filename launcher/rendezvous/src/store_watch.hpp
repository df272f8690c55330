// Watches a store from a thread of its own and says, once, when it is lost:
// its connection dropped (noticed at once: the thread blocks in a WAIT for a
// key nobody sets, which the dropped connection ends), or it fell silent
// (every `interval` a PING must be answered within `bound`). Used by an agent
// whose job depends on a store another agent hosts (static node 0's).
//
// `connected`, if given, runs on the watch's thread with its connection first
// (to measure the clock, off the caller's path); an Error it throws is the
// store's loss like any other.
//
// Owns the thread and its connection; the callbacks run on that thread.
// Destruction stops the watch and joins the thread (the callback never runs
// after it).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

namespace ddprun::rdzv {
class StoreClient;
}

namespace ddprun::launcher {

class StoreWatch {
 public:
  using Duration = std::chrono::milliseconds;

  StoreWatch(std::string host, std::uint16_t port, std::string never_set_key, Duration interval,
             Duration bound, std::function<void(const std::string& why)> lost,
             std::function<void(rdzv::StoreClient&)> connected = {});
  ~StoreWatch();
  StoreWatch(const StoreWatch&) = delete;
  StoreWatch& operator=(const StoreWatch&) = delete;

 private:
  void watch();

  std::string host_;
  std::uint16_t port_;
  std::string key_;
  Duration interval_;
  Duration bound_;
  std::function<void(const std::string&)> lost_;
  std::function<void(rdzv::StoreClient&)> connected_;
  std::mutex mutex_;
  bool stopping_ = false;
  rdzv::StoreClient* client_ = nullptr;  // the thread's, to interrupt it
  std::thread thread_;
};

}  // namespace ddprun::launcher

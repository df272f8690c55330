// What the agent keeps of a hang before it kills anything: the stacks of
// every local worker that still runs, taken at once (one StackCapture each,
// side by side), since the worker judged hung is seldom the one to blame
// alone: its peers wait on it, or it on them. Each worker's stacks are saved
// as stack.txt in its attempt directory (next to its error file) when it has
// one.
//
// Runs on the agent's io_context; one round of captures at a time. Owned by
// WorkerWatchdogs.
#pragma once

#include <sys/types.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ddprun/launcher/watchdogs/worker_watchdogs.hpp"
#include "ddprun/net/asio.hpp"

namespace ddprun::launcher {

class StackCapture;

class HungForensics {
 public:
  struct Target {
    std::size_t index = 0;  // the worker's local rank
    pid_t pid = 0;
    std::string error_file;  // its stack goes beside it; empty: nowhere
  };
  using Stacks = WorkerStacks;
  using Done = std::function<void(std::vector<Stacks>)>;

  HungForensics(net::asio::io_context& io, std::string path_variable);
  ~HungForensics();
  HungForensics(const HungForensics&) = delete;
  HungForensics& operator=(const HungForensics&) = delete;

  // Captures every target's stacks; `done` runs on the loop once all are in,
  // in the targets' order. False when a round is already running.
  bool capture(std::vector<Target> targets, Done done);
  bool busy() const { return done_ != nullptr; }
  // Stops the tools; `done` is not called.
  void cancel();

 private:
  void captured(std::size_t slot, std::string text);

  net::asio::io_context& io_;
  std::string path_variable_;
  std::vector<std::unique_ptr<StackCapture>> captures_;
  std::vector<Stacks> stacks_;
  std::size_t pending_ = 0;
  Done done_;
};

}  // namespace ddprun::launcher

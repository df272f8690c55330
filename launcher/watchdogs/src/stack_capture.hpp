// Captures a hung worker's stacks with the debugging tools found on the
// agent's PATH, one tool after the other, each bounded by a deadline:
//   py-spy dump --pid PID    only for a Python worker (/proc/PID/exe is named
//                             python*), and only if py-spy is installed;
//   eu-stack -p PID           native frames of every thread, if elfutils is
//                             installed; else
//   gdb -batch -p PID -ex 'thread apply all bt'   if gdb is installed.
// A Python worker's Python frames come from faulthandler when it is stopped
// (WorkerWatchdogs), not from here.
// What each printed (stdout and stderr together, up to 256 KiB) is returned
// under a "$ command" line, and when no tool is there, or none printed
// anything, one line says so.
//
// Runs on the agent's io_context: each tool is a Subprocess whose output is
// read through a pipe on the loop and which is SIGKILLed (its group) at its
// deadline. One capture at a time.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ddprun/launcher/process/subprocess.hpp"
#include "ddprun/net/asio.hpp"

namespace ddprun::launcher {

class StackCapture {
 public:
  using Done = std::function<void(std::string stacks)>;

  // `path_variable`: the PATH to find the tools on.
  StackCapture(net::asio::io_context& io, std::string path_variable,
               std::chrono::milliseconds per_tool = std::chrono::seconds(15));
  ~StackCapture();
  StackCapture(const StackCapture&) = delete;
  StackCapture& operator=(const StackCapture&) = delete;

  // Starts capturing `pid`'s stacks; `done` runs on the loop when every tool
  // has finished (or was cut off). False when a capture is already running.
  bool capture(pid_t pid, Done done);
  bool busy() const { return done_ != nullptr; }
  // Kills the tool that runs; `done` is not called. The loop can end.
  void cancel();

  // The commands that would run for `pid`, for the report and the tests.
  std::vector<std::vector<std::string>> commandsFor(pid_t pid) const;

 private:
  struct Run;
  void startNext(unsigned generation);
  void readMore();
  void finishRun();

  net::asio::io_context& io_;
  std::string path_variable_;
  std::chrono::milliseconds per_tool_;
  std::vector<std::vector<std::string>> pending_;
  std::unique_ptr<Run> running_;
  std::string text_;
  Done done_;                // set while a capture runs
  unsigned generation_ = 0;  // of the capture that runs: stale steps stop
};

}  // namespace ddprun::launcher

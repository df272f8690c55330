// Relays one worker stream (stdout or stderr) from its pipe: each chunk goes
// verbatim to the log file, if any, and each *whole line* goes to the
// console descriptor, if any, with the prefix, in one write(), so lines from
// different workers never interleave mid-line. A line still open at end of
// stream is completed with a newline.
//
// Runs on the agent's io_context thread; owns the pipe's read end and the
// file descriptor. Kept alive by its own pending read until end of stream or
// stop().
#pragma once

#include <array>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ddprun/net/asio.hpp"

namespace ddprun::launcher {

class LineRelay : public std::enable_shared_from_this<LineRelay> {
 public:
  // Takes ownership of pipe_fd and file_fd (-1: no file); console_fd (-1:
  // none) is borrowed.
  // on_finished runs once, at end of stream or stop(); on_output (if set)
  // on every chunk read.
  LineRelay(net::asio::io_context& io, int pipe_fd, int console_fd, std::string prefix, int file_fd,
            std::function<void()> on_finished, std::function<void()> on_output = {});
  ~LineRelay();

  void start();
  // Flushes a partial line and stops reading.
  void stop();
  bool finished() const { return finished_; }

 private:
  void read();
  void onData(std::size_t bytes);
  void writeConsoleLine(std::string_view line);
  void finish();

  net::asio::posix::stream_descriptor pipe_;
  int console_fd_;
  std::string prefix_;
  int file_fd_;
  std::array<char, 16 * 1024> buffer_{};
  std::string partial_;  // the current line, not yet ended
  std::function<void()> on_finished_;
  std::function<void()> on_output_;
  bool finished_ = false;
};

// A file descriptor, closed when it goes out of scope.
struct OwnedFd {
  int fd = -1;
  explicit OwnedFd(int descriptor) : fd(descriptor) {}
  ~OwnedFd();
  OwnedFd(const OwnedFd&) = delete;
  OwnedFd& operator=(const OwnedFd&) = delete;
};

// Every relay of one agent's workers. Opens each stream's log file (creating
// its directory) and, once the workers are gone, gives the streams a child of
// a worker still holds open half a second before cutting them, so the agent's
// loop can end. Runs on the agent's io_context thread.
class WorkerRelays {
 public:
  explicit WorkerRelays(net::asio::io_context& io) : io_(io), drain_(io) {}

  // Relays `pipe_fd` (taken) to `console_fd` (-1: none) with `prefix`, and
  // to `file` (empty: none), appending; `on_output` (if set) hears of every
  // chunk (the hang watch's "no output").
  void relay(int pipe_fd, int console_fd, const std::string& prefix, const std::string& file,
             std::function<void()> on_output = {});
  // A new pipe whose read end is relayed so; returns its write end, for a
  // worker's stdout or stderr. Throws SpawnError if no pipe can be made.
  OwnedFd pipe(int console_fd, const std::string& prefix, const std::string& file,
               std::function<void()> on_output = {});
  // The workers have exited: streams still open get 500 ms, then are cut.
  void drain();

 private:
  net::asio::io_context& io_;
  net::asio::steady_timer drain_;
  std::vector<std::shared_ptr<LineRelay>> relays_;
  int open_ = 0;  // relays not yet at end of stream
  bool draining_ = false;
};

}  // namespace ddprun::launcher

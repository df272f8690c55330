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

#include "ddprun/net/asio.hpp"

namespace ddprun::launcher {

class LineRelay : public std::enable_shared_from_this<LineRelay> {
 public:
  // Takes ownership of pipe_fd and file_fd (-1: no file); console_fd (-1:
  // none) is borrowed.
  // on_finished runs once, at end of stream or stop().
  LineRelay(net::asio::io_context& io, int pipe_fd, int console_fd, std::string prefix, int file_fd,
            std::function<void()> on_finished);
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
  bool finished_ = false;
};

}  // namespace ddprun::launcher

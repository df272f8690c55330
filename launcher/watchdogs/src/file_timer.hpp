// torch's file timer, served by the agent (docs/torchrun-contract.md §7.6):
// the named pipe of TORCHELASTIC_TIMER_FILE, where torch's FileTimerClient
// writes one JSON request per line (timer_requests.hpp), and the deadlines
// they set, kept per (pid, scope).
//
// Runs on the agent's io_context; there is no thread. The FIFO's read end is
// an Asio descriptor read as requests arrive; the agent also holds a write
// end open, so the FIFO never reports end of file between clients (each
// request opens the pipe, writes a line and closes it) and the loop is woken
// only by requests. One steady timer fires at the earliest deadline (compared
// with the wall clock, as the clients write it; looked at again at least every
// second while a timer is set, so a clock step cannot hide an expiry). When
// timers expire, `on_expired` gets them per pid and decides what to signal.
//
// Owns the FIFO: created at construction (replacing what was at the path, as
// torch does) and removed by the destructor.
#pragma once

#include <array>
#include <functional>
#include <string>

#include "ddprun/launcher/watchdogs/timer_requests.hpp"
#include "ddprun/net/asio.hpp"

namespace ddprun::launcher {

class FileTimer {
 public:
  using OnExpired = std::function<void(const ExpiredTimers&)>;

  // Throws ddprun::Error when the FIFO cannot be made or opened.
  FileTimer(net::asio::io_context& io, std::string path, OnExpired on_expired);
  ~FileTimer();
  FileTimer(const FileTimer&) = delete;
  FileTimer& operator=(const FileTimer&) = delete;

  const std::string& path() const { return path_; }
  // Forgets every timer (a new attempt: torch starts a new server per attempt).
  void clear();
  // Stops reading and timing, so the loop can end. Final.
  void stop();

 private:
  void read();
  void onData(std::size_t bytes);
  void onLine(std::string_view line);
  void schedule();
  void expire();

  std::string path_;
  OnExpired on_expired_;
  net::asio::posix::stream_descriptor reader_;
  int keep_open_ = -1;  // our own write end: no EOF between clients
  net::asio::steady_timer deadline_;
  TimerTable table_;
  std::array<char, 4096> buffer_{};
  std::string partial_;
  bool stopped_ = false;
  bool warned_malformed_ = false;
};

}  // namespace ddprun::launcher

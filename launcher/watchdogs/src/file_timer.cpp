#include "file_timer.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>

#include "ddprun/launcher/core/log.hpp"
#include "ddprun/proto/errors.hpp"

namespace ddprun::launcher {
namespace {

// torch refuses requests over PIPE_BUF (4096) bytes; a longer "line" is junk.
constexpr std::size_t kMaxLineBytes = 64 * 1024;
// While a timer is set, look at the wall clock at least this often.
constexpr std::chrono::milliseconds kLongestWait{1000};

int openFifo(const std::string& path) {
  std::error_code ignored;
  std::filesystem::remove(path, ignored);  // torch's server replaces what is there
  if (::mkfifo(path.c_str(), 0666) != 0) {
    throw Error("file timer: cannot create the named pipe " + path + ": " + std::strerror(errno));
  }
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    const int error = errno;
    ::unlink(path.c_str());
    throw Error("file timer: cannot open " + path + ": " + std::strerror(error));
  }
  return fd;
}

double wallNow() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

FileTimer::FileTimer(net::asio::io_context& io, std::string path, OnExpired on_expired)
    : path_(std::move(path)),
      on_expired_(std::move(on_expired)),
      reader_(io, openFifo(path_)),
      deadline_(io) {
  // Opening for writing succeeds now that a reader exists.
  keep_open_ = ::open(path_.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
  if (keep_open_ < 0) {
    const int error = errno;
    ::unlink(path_.c_str());
    throw Error("file timer: cannot open " + path_ + " for writing: " + std::strerror(error));
  }
  read();
}

FileTimer::~FileTimer() {
  // Asio's timer reports a failed cancel by throwing, and a destructor must
  // not let that out: said, and the FIFO removed all the same.
  try {
    stop();
  } catch (const std::exception& error) {
    log().warn("file timer: stopping it failed ({}); removing {} all the same", error.what(),
               path_);
  }
  ::unlink(path_.c_str());
}

void FileTimer::clear() {
  table_.clear();
  schedule();
}

void FileTimer::stop() {
  if (stopped_) {
    return;
  }
  stopped_ = true;
  net::error_code ignored;
  reader_.close(ignored);
  deadline_.cancel();
  if (keep_open_ >= 0) {
    ::close(keep_open_);
    keep_open_ = -1;
  }
}

void FileTimer::read() {
  reader_.async_read_some(net::asio::buffer(buffer_),
                          [this](const net::error_code& error, std::size_t bytes) {
                            if (error || stopped_) {
                              return;  // stop(); EOF cannot happen while we hold a write end
                            }
                            onData(bytes);
                            read();
                          });
}

void FileTimer::onData(std::size_t bytes) {
  std::string_view chunk(buffer_.data(), bytes);
  for (std::size_t newline; (newline = chunk.find('\n')) != std::string_view::npos;) {
    partial_.append(chunk.substr(0, newline));
    onLine(partial_);
    partial_.clear();
    chunk.remove_prefix(newline + 1);
  }
  partial_.append(chunk);
  if (partial_.size() > kMaxLineBytes) {
    onLine(partial_);  // reported as malformed, then dropped
    partial_.clear();
  }
  schedule();
}

void FileTimer::onLine(std::string_view line) {
  if (line.find_first_not_of(" \t\r") == std::string_view::npos) {
    return;
  }
  auto parsed = parseTimerRequest(line);
  if (auto* why = std::get_if<std::string>(&parsed)) {
    // One warning per run: a client writing junk must not flood the log.
    if (!warned_malformed_) {
      warned_malformed_ = true;
      log().warn(
          "file timer: ignoring a request that is not torch's ({}): '{}'; later ones are "
          "ignored silently",
          *why, line.substr(0, 200));
    }
    return;
  }
  table_.apply(std::get<TimerRequest>(parsed));
}

void FileTimer::schedule() {
  if (stopped_) {
    return;
  }
  const auto next = table_.nextExpiration();
  if (!next) {
    deadline_.cancel();
    return;
  }
  const auto wait = std::chrono::duration<double>(std::max(0.0, *next - wallNow()));
  deadline_.expires_after(
      std::min(std::chrono::ceil<std::chrono::milliseconds>(wait), kLongestWait));
  deadline_.async_wait([this](const net::error_code& error) {
    if (!error && !stopped_) {
      expire();
    }
  });
}

void FileTimer::expire() {
  for (const ExpiredTimers& expired : table_.takeExpired(wallNow())) {
    on_expired_(expired);
    if (stopped_) {
      return;
    }
  }
  schedule();
}

}  // namespace ddprun::launcher

#include "line_relay.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>

#include "ddprun/launcher/subprocess.hpp"

namespace ddprun::launcher {
namespace {

// A worker that never ends its line must not grow the agent without bound.
constexpr std::size_t kMaxLineBytes = 64 * 1024;

void writeAll(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t written = ::write(fd, bytes.data(), bytes.size());
    if (written < 0 && errno == EINTR) {
      continue;
    }
    if (written <= 0) {
      return;  // the console or disk went away: output is best effort
    }
    bytes.remove_prefix(static_cast<std::size_t>(written));
  }
}

}  // namespace

LineRelay::LineRelay(net::asio::io_context& io, int pipe_fd, int console_fd, std::string prefix,
                     int file_fd, std::function<void()> on_finished,
                     std::function<void()> on_output)
    : pipe_(io, pipe_fd),
      console_fd_(console_fd),
      prefix_(std::move(prefix)),
      file_fd_(file_fd),
      on_finished_(std::move(on_finished)),
      on_output_(std::move(on_output)) {}

LineRelay::~LineRelay() {
  if (file_fd_ >= 0) {
    ::close(file_fd_);
  }
}

void LineRelay::start() { read(); }

void LineRelay::read() {
  pipe_.async_read_some(net::asio::buffer(buffer_),
                        [self = shared_from_this()](const net::error_code& error, std::size_t n) {
                          if (error) {
                            self->finish();  // end of stream, or stop()
                            return;
                          }
                          self->onData(n);
                          self->read();
                        });
}

void LineRelay::onData(std::size_t bytes) {
  const std::string_view chunk(buffer_.data(), bytes);
  if (on_output_) {
    on_output_();
  }
  if (file_fd_ >= 0) {
    writeAll(file_fd_, chunk);
  }
  if (console_fd_ < 0) {
    return;
  }
  std::size_t start = 0;
  for (std::size_t newline; (newline = chunk.find('\n', start)) != std::string_view::npos;
       start = newline + 1) {
    partial_.append(chunk.substr(start, newline + 1 - start));
    writeConsoleLine(partial_);
    partial_.clear();
  }
  partial_.append(chunk.substr(start));
  if (partial_.size() >= kMaxLineBytes) {
    partial_.push_back('\n');
    writeConsoleLine(partial_);
    partial_.clear();
  }
}

void LineRelay::writeConsoleLine(std::string_view line) {
  if (prefix_.empty()) {
    writeAll(console_fd_, line);
    return;
  }
  std::string prefixed;
  prefixed.reserve(prefix_.size() + line.size());
  prefixed.append(prefix_).append(line);
  writeAll(console_fd_, prefixed);
}

void LineRelay::finish() {
  if (finished_) {
    return;
  }
  finished_ = true;
  if (console_fd_ >= 0 && !partial_.empty()) {
    partial_.push_back('\n');
    writeConsoleLine(partial_);
    partial_.clear();
  }
  if (on_finished_) {
    on_finished_();
  }
}

void LineRelay::stop() {
  net::error_code ignored;
  pipe_.close(ignored);
  finish();
}

OwnedFd::~OwnedFd() {
  if (fd >= 0) {
    ::close(fd);
  }
}

OwnedFd WorkerRelays::pipe(int console_fd, const std::string& prefix, const std::string& file,
                           std::function<void()> on_output) {
  int ends[2];
  if (::pipe2(ends, O_CLOEXEC) != 0) {
    throw SpawnError("cannot create a pipe for a worker's output", errno);
  }
  relay(ends[0], console_fd, prefix, file, std::move(on_output));
  return OwnedFd(ends[1]);
}

void WorkerRelays::relay(int pipe_fd, int console_fd, const std::string& prefix,
                         const std::string& file, std::function<void()> on_output) {
  int file_fd = -1;
  if (!file.empty()) {
    std::error_code ignored;
    std::filesystem::create_directories(std::filesystem::path(file).parent_path(), ignored);
    file_fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  }
  ++open_;
  auto relay = std::make_shared<LineRelay>(
      io_, pipe_fd, console_fd, prefix, file_fd,
      [this] {
        if (--open_ == 0 && draining_) {
          drain_.cancel();
        }
      },
      std::move(on_output));
  relay->start();
  relays_.push_back(std::move(relay));
}

void WorkerRelays::drain() {
  draining_ = true;
  if (open_ == 0) {
    return;
  }
  drain_.expires_after(std::chrono::milliseconds(500));
  drain_.async_wait([this](const net::error_code& error) {
    if (!error) {
      for (auto& relay : relays_) {
        relay->stop();
      }
    }
  });
}

}  // namespace ddprun::launcher

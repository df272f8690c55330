#include "ddprun/launcher/output/line_relay.hpp"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "ddprun/launcher/core/log.hpp"
#include "ddprun/launcher/core/write_all.hpp"
#include "ddprun/launcher/process/subprocess.hpp"
#include "worker_pty.hpp"

namespace ddprun::launcher {
namespace {

// A worker that never ends its line must not grow the agent without bound.
constexpr std::size_t kMaxLineBytes = 64 * 1024;

// What a terminal shows of a line rewritten with '\r': its last non-empty
// piece (a progress bar's latest state). Without '\r', the line itself.
std::string_view visiblePart(std::string_view line) {
  while (!line.empty()) {
    const auto cr = line.rfind('\r');
    if (cr == std::string_view::npos) {
      return line;
    }
    if (cr + 1 < line.size()) {
      return line.substr(cr + 1);
    }
    line.remove_suffix(1);
  }
  return line;
}

bool matchesAny(std::string_view line, const std::vector<std::string>& substrings) {
  return std::any_of(substrings.begin(), substrings.end(), [line](const std::string& substring) {
    return line.find(substring) != std::string_view::npos;
  });
}

int openAppending(const std::string& path) {
  std::error_code ignored;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ignored);
  return ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
}

}  // namespace

LineRelay::LineRelay(net::asio::io_context& io, int source_fd, Sinks sinks,
                     std::function<void()> on_finished, std::function<void()> on_output)
    : source_(io, source_fd),
      sinks_(std::move(sinks)),
      on_finished_(std::move(on_finished)),
      on_output_(std::move(on_output)) {}

LineRelay::~LineRelay() {
  if (sinks_.file_fd >= 0) {
    ::close(sinks_.file_fd);
  }
}

void LineRelay::start() { read(); }

void LineRelay::read() {
  source_.async_read_some(net::asio::buffer(buffer_),
                          [self = shared_from_this()](const net::error_code& error, std::size_t n) {
                            if (error) {
                              self->finish();  // end of stream (EOF, or a pty's EIO), or stop()
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
  if (sinks_.file_fd >= 0) {
    writeAll(sinks_.file_fd, chunk);
  }
  if (sinks_.console == nullptr && !sinks_.filtered) {
    return;
  }
  std::size_t start = 0;
  for (std::size_t newline; (newline = chunk.find('\n', start)) != std::string_view::npos;
       start = newline + 1) {
    partial_.append(chunk.substr(start, newline + 1 - start));
    onLine(partial_);
    partial_.clear();
  }
  partial_.append(chunk.substr(start));
  capPartialLine();
  // A line rewritten with '\r' is shown as it changes; any other waits for
  // its end, so a line written in pieces is not drawn piece by piece.
  if (sinks_.console != nullptr && sinks_.console->isTerminal() &&
      partial_.find('\r') != std::string::npos) {
    const std::string_view visible = visiblePart(partial_);
    if (!visible.empty()) {
      sinks_.console->showLive(this, sinks_.prefix + std::string(visible));
    }
  }
}

// A line past the limit keeps only what a terminal would still show of it;
// if that is still too long, it is ended here.
void LineRelay::capPartialLine() {
  if (partial_.size() < kMaxLineBytes) {
    return;
  }
  const std::string_view visible = visiblePart(partial_);
  if (visible.size() < partial_.size()) {
    partial_ = std::string(visible);
  }
  if (partial_.size() >= kMaxLineBytes) {
    partial_.push_back('\n');
    onLine(partial_);
    partial_.clear();
  }
}

void LineRelay::onLine(std::string_view line) {
  if (sinks_.filtered && matchesAny(line, sinks_.filters)) {
    writeAll(sinks_.filtered->fd, sinks_.filtered_prefix + std::string(line));
  }
  if (sinks_.console == nullptr) {
    return;
  }
  std::string shown = sinks_.prefix;
  if (sinks_.console->isTerminal() && line.find('\r') != std::string_view::npos) {
    // Raw, its '\r' would draw over the prefix: the final state alone.
    shown.append(visiblePart(line.substr(0, line.size() - 1))).push_back('\n');
  } else {
    shown.append(line);
  }
  sinks_.console->writeLine(this, shown);
}

void LineRelay::finish() {
  if (finished_) {
    return;
  }
  finished_ = true;
  if (!partial_.empty()) {
    partial_.push_back('\n');
    onLine(partial_);
    partial_.clear();
  }
  if (on_finished_) {
    on_finished_();
  }
}

void LineRelay::stop() {
  net::error_code ignored;
  source_.close(ignored);
  finish();
}

WorkerRelays::WorkerRelays(net::asio::io_context& io)
    : io_(io), consoles_(consolesOfThisProcess()), drain_(io), resizes_(io) {}

WorkerEnd WorkerRelays::open(Console& console, const StreamRoute& route,
                             std::function<void()> on_output) {
  if (route.to_console && route.may_be_terminal && console.isTerminal() && !no_ptys_) {
    if (const auto pty = openWorkerPty(console.windowSize().value_or(winsize{}))) {
      OwnedFd slave(pty->slave);
      auto relayed = relay(pty->master, console, route, std::move(on_output));
      ptys_.push_back({std::move(relayed), &console});
      watchResizes();
      return {std::move(slave), true};
    }
    // Output still flows, only without a terminal: said once, not fatal.
    log().warn("cannot open a pseudo-terminal for the workers' output ({}): pipes instead",
               std::strerror(errno));
    no_ptys_ = true;
  }
  int ends[2];
  if (::pipe2(ends, O_CLOEXEC) != 0) {
    throw SpawnError("cannot create a pipe for a worker's output", errno);
  }
  OwnedFd write_end(ends[1]);
  relay(ends[0], console, route, std::move(on_output));
  return {std::move(write_end), false};
}

std::shared_ptr<LineRelay> WorkerRelays::relay(int source_fd, Console& console,
                                               const StreamRoute& route,
                                               std::function<void()> on_output) {
  // Relays of earlier attempts that have ended let go of their descriptors.
  std::erase_if(relays_, [](const auto& relay) { return relay->finished(); });
  std::erase_if(ptys_, [](const Pty& pty) { return pty.relay->finished(); });
  LineRelay::Sinks sinks;
  sinks.console = route.to_console ? &console : nullptr;
  sinks.prefix = route.prefix;
  sinks.file_fd = route.file.empty() ? -1 : openAppending(route.file);
  if (!route.filter.substrings.empty() && !route.filter.file.empty()) {
    sinks.filters = route.filter.substrings;
    sinks.filtered = filteredFile(route.filter.file);
    sinks.filtered_prefix = route.filter.prefix;
  }
  ++open_;
  auto relay = std::make_shared<LineRelay>(
      io_, source_fd, std::move(sinks),
      [this] {
        if (--open_ == 0 && draining_) {
          drain_.cancel();
        }
      },
      std::move(on_output));
  relay->start();
  relays_.push_back(relay);
  return relay;
}

// One descriptor per filtered file, shared by the streams writing to it:
// each line is one write() on it (O_APPEND), so lines never interleave.
std::shared_ptr<OwnedFd> WorkerRelays::filteredFile(const std::string& path) {
  std::erase_if(filtered_files_, [](const auto& entry) { return entry.second.expired(); });
  if (auto shared = filtered_files_[path].lock()) {
    return shared;
  }
  auto file = std::make_shared<OwnedFd>(openAppending(path));
  if (file->fd < 0) {
    return nullptr;  // like the log files: output is best effort
  }
  filtered_files_[path] = file;
  return file;
}

// ddprun's terminal was resized (SIGWINCH): so are the workers'. Boost 1.74's
// signal_set installs its handler without SA_RESTART; a resize comes often
// and must not interrupt blocking calls on the agent's other threads.
void WorkerRelays::watchResizes() {
  if (watching_resizes_) {
    return;
  }
  watching_resizes_ = true;
  resizes_.add(SIGWINCH);
  struct sigaction action {};
  if (::sigaction(SIGWINCH, nullptr, &action) == 0) {
    action.sa_flags |= SA_RESTART;
    ::sigaction(SIGWINCH, &action, nullptr);
  }
  awaitResize();
}

void WorkerRelays::awaitResize() {
  resizes_.async_wait([this](const net::error_code& error, int) {
    // drain(): the workers are gone (a resize already due then must not
    // wait again, or the loop would never end).
    if (error || draining_) {
      return;
    }
    for (auto& pty : ptys_) {
      if (!pty.relay->finished()) {
        resizePty(pty.relay->sourceFd(), pty.console->windowSize().value_or(winsize{}));
      }
    }
    if (on_resized_) {
      on_resized_();
    }
    awaitResize();
  });
}

void WorkerRelays::drain() {
  draining_ = true;
  net::error_code ignored;
  resizes_.cancel(ignored);  // nothing left to resize; the loop may end
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

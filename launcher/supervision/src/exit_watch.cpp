#include "ddprun/launcher/supervision/exit_watch.hpp"

#include <poll.h>
#include <unistd.h>

#include <cerrno>

#include "ddprun/launcher/process/subprocess.hpp"

namespace ddprun::launcher {
namespace {

// What the kernel says now: a pidfd is readable once its process has exited.
bool hasExited(int pidfd) {
  pollfd watch{pidfd, POLLIN, 0};
  int ready = 0;
  do {
    ready = poll(&watch, 1, 0);
  } while (ready < 0 && errno == EINTR);
  return ready > 0 && (watch.revents & POLLIN) != 0;
}

}  // namespace

struct ExitWatch::State {
  State(net::asio::io_context& io, int fd, std::function<void()> callback)
      : descriptor(io, fd), on_exit(std::move(callback)) {}
  net::asio::posix::stream_descriptor descriptor;
  std::function<void()> on_exit;  // emptied when the watch goes
};

ExitWatch::ExitWatch(net::asio::io_context& io, int pidfd, std::function<void()> on_exit,
                     const std::string& what) {
  const int fd = ::dup(pidfd);
  if (fd < 0) {
    throw SpawnError("cannot watch " + what + ": dup", errno);
  }
  state_ = std::make_shared<State>(io, fd, std::move(on_exit));
  arm(state_);
}

ExitWatch::~ExitWatch() {
  // A completion already queued still runs (with success): it finds no
  // callback. Closing cancels a wait not yet completed.
  state_->on_exit = nullptr;
  net::error_code ignored;
  state_->descriptor.close(ignored);
}

void ExitWatch::arm(const std::shared_ptr<State>& state) {
  state->descriptor.async_wait(net::asio::posix::stream_descriptor::wait_read,
                               [state](const net::error_code& error) {
                                 if (error || !state->on_exit) {
                                   return;
                                 }
                                 if (!hasExited(state->descriptor.native_handle())) {
                                   arm(state);  // not the kernel's word: wait again
                                   return;
                                 }
                                 auto on_exit = std::move(state->on_exit);
                                 state->on_exit = nullptr;
                                 on_exit();
                               });
}

}  // namespace ddprun::launcher

// OwnedFd: a file descriptor closed when it goes out of scope, on every path
// out of the code that opened it. Movable, not copyable; any thread (it is
// used by one at a time).
#pragma once

#include <unistd.h>

#include <utility>

namespace ddprun::launcher {

struct OwnedFd {
  int fd = -1;
  explicit OwnedFd(int descriptor) : fd(descriptor) {}
  ~OwnedFd() {
    if (fd >= 0) {
      ::close(fd);
    }
  }
  OwnedFd(OwnedFd&& other) noexcept : fd(std::exchange(other.fd, -1)) {}
  OwnedFd(const OwnedFd&) = delete;
  OwnedFd& operator=(const OwnedFd&) = delete;
  OwnedFd& operator=(OwnedFd&&) = delete;
};

}  // namespace ddprun::launcher

// SilentListener owns a TCP socket listening on 127.0.0.1 at a port the
// kernel chose, which nobody ever accepts from: the kernel completes up to
// `backlog` handshakes, so a client connects at once, and then no byte it
// sends is read or answered. What a test points a client at to see it give
// up at its timeout. No thread of its own; closed when destroyed.
#pragma once

#include <cstdint>

namespace ddprun::test_support {

class SilentListener {
 public:
  // Listens or throws std::system_error.
  explicit SilentListener(int backlog = 16);
  ~SilentListener();

  SilentListener(const SilentListener&) = delete;
  SilentListener& operator=(const SilentListener&) = delete;

  std::uint16_t port() const { return port_; }

 private:
  int fd_ = -1;
  std::uint16_t port_ = 0;
};

}  // namespace ddprun::test_support

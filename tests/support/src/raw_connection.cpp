#include "ddprun/test_support/raw_connection.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>
#include <utility>

namespace ddprun::test_support {

namespace {

using Clock = std::chrono::steady_clock;

[[noreturn]] void throwErrno(const char* what) {
  throw std::system_error(errno, std::generic_category(), what);
}

int remainingMillis(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return left.count() > 0 ? static_cast<int>(left.count()) : 0;
}

}  // namespace

RawConnection::RawConnection(std::uint16_t port) {
  fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd_ < 0) {
    throwErrno("socket");
  }
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    const int saved = errno;
    ::close(fd_);
    fd_ = -1;
    throw std::system_error(saved, std::generic_category(),
                            "connect to 127.0.0.1:" + std::to_string(port));
  }
  // Small writes must leave at once, or chunk boundaries the replay wants
  // to preserve would be merged by Nagle's algorithm.
  const int one = 1;
  ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  sockaddr_in local{};
  socklen_t len = sizeof(local);
  if (::getsockname(fd_, reinterpret_cast<sockaddr*>(&local), &len) == 0) {
    local_port_ = ntohs(local.sin_port);
  }
}

RawConnection::~RawConnection() { close(); }

RawConnection::RawConnection(RawConnection&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)),
      local_port_(other.local_port_),
      peer_closed_(other.peer_closed_),
      buffer_(std::move(other.buffer_)) {}

RawConnection& RawConnection::operator=(RawConnection&& other) noexcept {
  if (this != &other) {
    close();
    fd_ = std::exchange(other.fd_, -1);
    local_port_ = other.local_port_;
    peer_closed_ = other.peer_closed_;
    buffer_ = std::move(other.buffer_);
  }
  return *this;
}

void RawConnection::close() {
  if (fd_ >= 0) {
    ::close(fd_);
    fd_ = -1;
  }
}

void RawConnection::shutdownWrite() {
  if (fd_ >= 0) {
    ::shutdown(fd_, SHUT_WR);
  }
}

std::string RawConnection::localAddress() const {
  return "127.0.0.1:" + std::to_string(local_port_);
}

bool RawConnection::sendAll(std::string_view bytes) {
  while (!bytes.empty() && fd_ >= 0) {
    const ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      return false;
    }
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
  return bytes.empty();
}

bool RawConnection::readSome(Millis timeout) {
  if (fd_ < 0 || peer_closed_) {
    return false;
  }
  pollfd pfd{fd_, POLLIN, 0};
  const int ready = ::poll(&pfd, 1, static_cast<int>(timeout.count()));
  if (ready <= 0) {
    return false;  // timeout (or EINTR, which callers treat the same way)
  }
  char chunk[64 * 1024];
  const ssize_t n = ::recv(fd_, chunk, sizeof(chunk), 0);
  if (n > 0) {
    buffer_.append(chunk, static_cast<std::size_t>(n));
    return true;
  }
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) {
    return false;
  }
  peer_closed_ = true;  // EOF, or ECONNRESET and friends
  return false;
}

std::optional<std::string> RawConnection::recvExact(std::size_t n, Millis timeout) {
  const auto deadline = Clock::now() + timeout;
  while (buffer_.size() < n) {
    if (peer_closed_ || fd_ < 0) {
      return std::nullopt;
    }
    if (!readSome(Millis(remainingMillis(deadline))) && remainingMillis(deadline) == 0) {
      return std::nullopt;
    }
  }
  std::string out = buffer_.substr(0, n);
  buffer_.erase(0, n);
  return out;
}

bool RawConnection::waitForClose(Millis timeout) {
  const auto deadline = Clock::now() + timeout;
  while (!peer_closed_ && fd_ >= 0) {
    if (!readSome(Millis(remainingMillis(deadline))) && !peer_closed_ &&
        remainingMillis(deadline) == 0) {
      return false;
    }
  }
  return peer_closed_;
}

bool RawConnection::bytesAvailableWithin(Millis timeout) {
  const auto deadline = Clock::now() + timeout;
  while (buffer_.empty() && !peer_closed_ && fd_ >= 0) {
    if (!readSome(Millis(remainingMillis(deadline))) && remainingMillis(deadline) == 0) {
      break;
    }
  }
  return !buffer_.empty();
}

}  // namespace ddprun::test_support

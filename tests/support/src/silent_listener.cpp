#include "ddprun/test_support/silent_listener.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>

namespace ddprun::test_support {

SilentListener::SilentListener(int backlog) {
  fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd_ < 0) {
    throw std::system_error(errno, std::generic_category(), "SilentListener: socket");
  }
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  auto* any = reinterpret_cast<sockaddr*>(&address);
  if (::bind(fd_, any, sizeof(address)) != 0 || ::listen(fd_, backlog) != 0 ||
      ::getsockname(fd_, any, &length) != 0) {
    const int error = errno;
    ::close(fd_);
    throw std::system_error(error, std::generic_category(), "SilentListener: listen on 127.0.0.1");
  }
  port_ = ntohs(address.sin_port);
}

SilentListener::~SilentListener() { ::close(fd_); }

}  // namespace ddprun::test_support

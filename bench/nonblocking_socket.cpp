#include "nonblocking_socket.hpp"

#include <arpa/inet.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace ddprun::bench {

std::string errnoText() { return std::strerror(errno); }

sockaddr_in ipv4Address(const std::string& host, std::uint16_t port) {
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  if (::inet_pton(AF_INET, host.c_str(), &address.sin_addr) != 1) {
    throw std::runtime_error("not an IPv4 address: " + host);
  }
  return address;
}

std::uint32_t loopbackSource(std::size_t index, int source_addresses) {
  const auto count = static_cast<std::size_t>(source_addresses < 1 ? 1 : source_addresses);
  return INADDR_LOOPBACK + static_cast<std::uint32_t>(index % count);
}

int startConnect(const sockaddr_in& server, std::uint32_t source_ip) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    throw std::runtime_error("socket: " + errnoText() + " (the fd limit?)");
  }
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  if (source_ip != 0) {
    ::setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof(one));
    sockaddr_in source{};
    source.sin_family = AF_INET;
    source.sin_addr.s_addr = htonl(source_ip);
    if (::bind(fd, reinterpret_cast<const sockaddr*>(&source), sizeof(source)) != 0) {
      const std::string why = errnoText();
      ::close(fd);
      throw std::runtime_error("bind to a 127.0.0.x source address: " + why);
    }
  }
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&server), sizeof(server)) != 0 &&
      errno != EINPROGRESS) {
    const bool ports_ran_out = errno == EADDRNOTAVAIL;
    const std::string why = errnoText();
    ::close(fd);
    throw std::runtime_error("connect: " + why +
                             (ports_ran_out ? " (ephemeral ports ran out)" : ""));
  }
  return fd;
}

int socketError(int fd) {
  int error = 0;
  socklen_t length = sizeof(error);
  if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length) != 0) {
    return errno;
  }
  return error;
}

std::string localAddressOf(int fd) {
  sockaddr_in address{};
  socklen_t length = sizeof(address);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    throw std::runtime_error("getsockname: " + errnoText());
  }
  char text[INET_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET, &address.sin_addr, text, sizeof(text));
  return text;
}

Epoll::Epoll() : fd_(::epoll_create1(EPOLL_CLOEXEC)) {
  if (fd_ < 0) {
    throw std::runtime_error("epoll_create1: " + errnoText());
  }
}

Epoll::~Epoll() { ::close(fd_); }

void Epoll::add(int fd, std::uint32_t events, std::uint64_t tag) {
  epoll_event event{};
  event.events = events;
  event.data.u64 = tag;
  if (::epoll_ctl(fd_, EPOLL_CTL_ADD, fd, &event) != 0) {
    throw std::runtime_error("epoll_ctl add: " + errnoText());
  }
}

void Epoll::modify(int fd, std::uint32_t events, std::uint64_t tag) {
  epoll_event event{};
  event.events = events;
  event.data.u64 = tag;
  if (::epoll_ctl(fd_, EPOLL_CTL_MOD, fd, &event) != 0) {
    throw std::runtime_error("epoll_ctl modify: " + errnoText());
  }
}

int Epoll::wait(std::span<epoll_event> events, int timeout_ms) {
  const int n = ::epoll_wait(fd_, events.data(), static_cast<int>(events.size()), timeout_ms);
  if (n < 0) {
    if (errno == EINTR) {
      return 0;
    }
    throw std::runtime_error("epoll_wait: " + errnoText());
  }
  return n;
}

}  // namespace ddprun::bench

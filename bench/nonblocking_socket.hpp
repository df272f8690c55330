// What a benchmark needs to hold thousands of loopback TCP connections from
// one thread: non-blocking connects spread over 127.0.0.x source addresses
// (each has its own ephemeral port range, about 28k ports by default), and an
// epoll set. Plain POSIX: epoll with level-triggered events is what an
// event loop library would wrap here, and the loops that use it (rdzv_scale's
// agents) need nothing else from one. Errors throw std::runtime_error naming
// the call and errno. Stateless functions; an Epoll belongs to the thread
// that polls it.
#pragma once

#include <netinet/in.h>
#include <sys/epoll.h>

#include <cstdint>
#include <span>
#include <string>

namespace ddprun::bench {

// strerror(errno), for messages.
std::string errnoText();

// host:port as an IPv4 socket address; throws for a host that is not a
// dotted IPv4 address.
sockaddr_in ipv4Address(const std::string& host, std::uint16_t port);

// The source address of connection `index` when connections are spread
// over `source_addresses` addresses 127.0.0.1, 127.0.0.2, ...; host byte
// order.
std::uint32_t loopbackSource(std::size_t index, int source_addresses);

// A non-blocking TCP socket (TCP_NODELAY, close-on-exec) whose connect to
// `server` has started. With `source_ip` (host byte order, not 0) it is
// bound to that address first, its port still picked at connect time
// (IP_BIND_ADDRESS_NO_PORT), so ports are shared across source addresses.
// Returns the descriptor; the connect completes when it turns writable
// (then socketError() says how it went).
int startConnect(const sockaddr_in& server, std::uint32_t source_ip);

// The pending error of a socket (SO_ERROR): 0 once a connect has succeeded.
int socketError(int fd);

// "a.b.c.d" of a connected socket's own address (getsockname).
std::string localAddressOf(int fd);

// An epoll set; each descriptor is registered with a 64-bit tag.
class Epoll {
 public:
  Epoll();
  ~Epoll();
  Epoll(const Epoll&) = delete;
  Epoll& operator=(const Epoll&) = delete;

  void add(int fd, std::uint32_t events, std::uint64_t tag);
  void modify(int fd, std::uint32_t events, std::uint64_t tag);
  // Waits up to `timeout_ms` (EINTR is no event); the number of events.
  int wait(std::span<epoll_event> events, int timeout_ms);

 private:
  int fd_ = -1;
};

}  // namespace ddprun::bench

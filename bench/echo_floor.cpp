// echo_floor: the kernel's floor under store_bench's raw load. A
// single-threaded epoll server that answers every request the raw load sends
// (LibTorch 1.13's SET, GET, ADD, CHECK and WAIT bytes) with a reply of the
// shape the client waits for, and does nothing else: one recv() for what has
// arrived, one send() for the replies to it. Its CPU per round trip is what
// loopback TCP and epoll cost a server; ddprund's over it says how far
// ddprund is from that limit.
//
//   echo_floor [--host ADDR] [--port N; 0 = free port] [--port-file PATH]
//
// Prints "echo_floor listening on <host>:<port>", writes the port to
// --port-file atomically (write, then rename) and runs until SIGTERM or SIGINT
// (exit 0), as the other servers store_bench starts do.
//
// It is no store: a GET gets the last value its connection SET, an ADD its
// connection's running sum, CHECK and WAIT "ready". The raw load's GET reads
// the key its own connection has just set, so it cannot tell. The requests
// are framed here, not by proto's decoder, so the floor runs none of
// ddprund's code; only the wire vocabulary is shared.
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstring>
#include <iostream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "ddprun/test_support/fd_limit.hpp"
#include "echo_floor_framing.hpp"
#include "nonblocking_socket.hpp"
#include "server_options.hpp"

namespace bench = ddprun::bench;

namespace {

volatile std::sig_atomic_t g_stop = 0;

void onStopSignal(int) { g_stop = 1; }

// No SA_RESTART: the signal ends epoll_wait at once.
void catchStopSignals() {
  struct sigaction action {};
  action.sa_handler = onStopSignal;
  ::sigaction(SIGTERM, &action, nullptr);
  ::sigaction(SIGINT, &action, nullptr);
}

int listenOn(const std::string& host, std::uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  const int one = 1;
  const sockaddr_in address = bench::ipv4Address(host, port);
  if (fd < 0 || ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
      ::bind(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0 ||
      ::listen(fd, SOMAXCONN) != 0) {
    throw std::runtime_error("listen on " + host + ":" + std::to_string(port) + ": " +
                             bench::errnoText());
  }
  return fd;
}

std::uint16_t boundPort(int fd) {
  sockaddr_in address{};
  socklen_t length = sizeof(address);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    throw std::runtime_error("getsockname: " + bench::errnoText());
  }
  return ntohs(address.sin_port);
}

// The server: its listening socket, its epoll set and every connection's
// state, indexed by descriptor, with one read buffer and one reply buffer
// that all connections share. Run by the main (only) thread.
class EchoFloor {
 public:
  EchoFloor(const std::string& host, std::uint16_t port)
      : listener_(listenOn(host, port)), port_(boundPort(listener_)) {
    epoll_.add(listener_, EPOLLIN, kListenerTag);
  }
  ~EchoFloor() { ::close(listener_); }
  EchoFloor(const EchoFloor&) = delete;
  EchoFloor& operator=(const EchoFloor&) = delete;

  std::uint16_t port() const { return port_; }

  void serveUntilStopped() {
    std::array<epoll_event, 1024> events{};
    while (g_stop == 0) {
      // A timeout, so that a signal landing just before the wait is not missed.
      const int n = epoll_.wait(events, 200);
      for (int i = 0; i < n; ++i) {
        const std::uint64_t tag = events[static_cast<std::size_t>(i)].data.u64;
        if (tag == kListenerTag) {
          acceptAll();
        } else {
          onReadable(static_cast<int>(tag));
        }
      }
    }
  }

 private:
  static constexpr std::uint64_t kListenerTag = ~std::uint64_t{0};

  void acceptAll() {
    for (;;) {
      const int fd = ::accept4(listener_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        return;  // EAGAIN: every pending connection taken (or one reset while queued)
      }
      const int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      if (static_cast<std::size_t>(fd) >= connections_.size()) {
        connections_.resize(static_cast<std::size_t>(fd) + 1);
      }
      connections_[static_cast<std::size_t>(fd)] = {};
      epoll_.add(fd, EPOLLIN, static_cast<std::uint64_t>(fd));
    }
  }

  // One recv() of what has arrived, then one send() of every reply it asks.
  void onReadable(int fd) {
    const ssize_t n = ::recv(fd, buffer_.data(), buffer_.size(), 0);
    if (n <= 0) {
      if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
        drop(fd, nullptr);
      }
      return;
    }
    bench::EchoConnection& connection = connections_[static_cast<std::size_t>(fd)];
    reply_.clear();
    const std::string_view arrived(buffer_.data(), static_cast<std::size_t>(n));
    if (const char* error = bench::answerArrived(arrived, connection, reply_)) {
      drop(fd, error);
      return;
    }
    // A client with one request in flight never fills a socket buffer; a
    // short send would mean the floor is measuring something else.
    if (!reply_.empty() && ::send(fd, reply_.data(), reply_.size(), MSG_NOSIGNAL) !=
                               static_cast<ssize_t>(reply_.size())) {
      drop(fd, "a reply did not fit the socket in one send");
    }
  }

  void drop(int fd, const char* why) {
    if (why != nullptr) {
      std::cerr << "echo_floor: closing a connection: " << why << '\n';
    }
    connections_[static_cast<std::size_t>(fd)] = {};
    ::close(fd);  // also leaves the epoll set
  }

  int listener_;
  std::uint16_t port_;
  bench::Epoll epoll_;
  std::vector<bench::EchoConnection> connections_;
  std::array<char, 64 * 1024> buffer_{};
  std::string reply_;
};

}  // namespace

int main(int argc, char** argv) try {
  const ddprun::bench::ServerOptions options = ddprun::bench::parseServerOptions(argc, argv);
  ddprun::test_support::raiseFdLimit();  // as ddprund and LibTorch's server do
  catchStopSignals();
  EchoFloor server(options.host, options.port);
  std::cout << "echo_floor listening on " << options.host << ':' << server.port() << std::endl;
  if (!options.port_file.empty()) {
    ddprun::bench::writePortFile(options.port_file, server.port());
  }
  server.serveUntilStopped();
  return 0;
} catch (const std::exception& error) {
  std::cerr << "echo_floor: " << error.what() << '\n';
  return 1;
}

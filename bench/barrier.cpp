#include "barrier.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "ddprun/proto/tcpstore_codec.hpp"
#include "machine.hpp"

namespace ddprun::bench {
namespace {

using Clock = std::chrono::steady_clock;
namespace proto = ddprun::proto;

enum class ConnState : std::uint8_t {
  Unused,
  Connecting,
  Probing,
  Ready,
  AwaitAdd,
  AwaitStop,
  Done
};

struct Conn {
  int fd = -1;
  ConnState state = ConnState::Unused;
  std::uint8_t have = 0;  // bytes of the current reply received so far
  std::array<std::uint8_t, 8> buf{};
};

std::string encode(proto::Command command, std::vector<std::string_view> keys,
                   std::vector<std::string_view> values = {}, std::int64_t number = 0) {
  return proto::encodeRequest(
      proto::Dialect::Legacy113,
      proto::makeRequest(command, std::move(keys), std::move(values), number));
}

// The four requests the barrier sends, pre-encoded once.
struct Requests {
  std::string probe = encode(proto::Command::Check, {});  // zero keys: READY at once
  std::string add = encode(proto::Command::Add, {"barrier"}, {}, 1);
  std::string wait = encode(proto::Command::Wait, {"go"});
  std::string set_and_wait = encode(proto::Command::Set, {"go"}, {"1"}) + wait;
};

class BarrierRun {
 public:
  explicit BarrierRun(const BarrierOptions& options)
      : options_(options), conns_(static_cast<std::size_t>(options.connections)) {
    epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
    if (epoll_fd_ < 0) {
      throw std::runtime_error("epoll_create1: " + errnoText());
    }
  }

  ~BarrierRun() {
    for (auto& conn : conns_) {
      if (conn.fd >= 0) {
        ::close(conn.fd);
      }
    }
    ::close(epoll_fd_);
  }

  BarrierRun(const BarrierRun&) = delete;
  BarrierRun& operator=(const BarrierRun&) = delete;

  // Connects every connection, at most connect_window in flight; each counts
  // as connected once the server has answered its probe.
  void connectAll(BarrierResult& result) {
    const auto start = Clock::now();
    const auto deadline = start + options_.connect_timeout;
    std::size_t next = 0;
    int in_flight = 0;
    while (ready_ < options_.connections) {
      for (; in_flight < options_.connect_window && next < conns_.size(); ++next, ++in_flight) {
        startConnect(next);
      }
      const int before = ready_;
      if (!pollOnce(deadline)) {
        throw std::runtime_error(std::to_string(ready_) + " of " +
                                 std::to_string(options_.connections) + " connected within " +
                                 std::to_string(options_.connect_timeout.count()) + " ms");
      }
      in_flight -= ready_ - before;
    }
    result.connect_seconds = secondsSince(start);
    result.connected = true;
  }

  // Sends every ADD, then serves replies until all are released or time is up.
  void runBarrier(BarrierResult& result) {
    const auto start = Clock::now();
    const auto deadline = start + options_.barrier_timeout;
    for (std::size_t i = 0; i < conns_.size(); ++i) {
      sendAll(i, requests_.add);
      conns_[i].state = ConnState::AwaitAdd;
    }
    while (done_ < options_.connections) {
      if (!pollOnce(deadline)) {
        result.completed = done_;
        throw std::runtime_error("did not finish in " +
                                 std::to_string(options_.barrier_timeout.count() / 1000.0) +
                                 " s (" + std::to_string(done_) + " of " +
                                 std::to_string(options_.connections) + " released)");
      }
    }
    result.barrier_seconds = std::chrono::duration<double>(last_release_ - start).count();
    result.completed = done_;
    result.finished = true;
  }

 private:
  static std::string errnoText() { return std::strerror(errno); }

  static double secondsSince(Clock::time_point start) {
    return std::chrono::duration<double>(Clock::now() - start).count();
  }

  sockaddr_in address(std::uint32_t host_order_ip, std::uint16_t port) const {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(host_order_ip);
    return addr;
  }

  void startConnect(std::size_t index) {
    Conn& conn = conns_[index];
    conn.fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (conn.fd < 0) {
      throw std::runtime_error("socket: " + errnoText() + " (raise the fd limit)");
    }
    int one = 1;
    ::setsockopt(conn.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (options_.source_addresses > 1) {
      bindSource(conn.fd, index);
    }
    sockaddr_in server{};
    server.sin_family = AF_INET;
    server.sin_port = htons(options_.port);
    if (::inet_pton(AF_INET, options_.host.c_str(), &server.sin_addr) != 1) {
      throw std::runtime_error("not an IPv4 address: " + options_.host);
    }
    if (::connect(conn.fd, reinterpret_cast<sockaddr*>(&server), sizeof(server)) != 0 &&
        errno != EINPROGRESS) {
      throw std::runtime_error("connect: " + errnoText());
    }
    conn.state = ConnState::Connecting;
    watch(index, EPOLLOUT, EPOLL_CTL_ADD);
  }

  // Spreads connections over 127.0.0.1.. so each source address has its own
  // ephemeral port range; the port is still chosen at connect time.
  void bindSource(int fd, std::size_t index) {
    int one = 1;
    ::setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof(one));
    const auto offset =
        static_cast<std::uint32_t>(index % static_cast<std::size_t>(options_.source_addresses));
    sockaddr_in source = address(INADDR_LOOPBACK + offset, 0);
    if (::bind(fd, reinterpret_cast<sockaddr*>(&source), sizeof(source)) != 0) {
      throw std::runtime_error("bind 127.0.0.x: " + errnoText());
    }
  }

  void watch(std::size_t index, std::uint32_t events, int op) {
    epoll_event event{};
    event.events = events;
    event.data.u64 = index;
    if (::epoll_ctl(epoll_fd_, op, conns_[index].fd, &event) != 0) {
      throw std::runtime_error("epoll_ctl: " + errnoText());
    }
  }

  // Requests are tiny and the socket buffer empty, so a short write means
  // something is badly wrong; treat it as an error rather than buffering.
  void sendAll(std::size_t index, const std::string& bytes) {
    const ssize_t n = ::send(conns_[index].fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n != static_cast<ssize_t>(bytes.size())) {
      throw std::runtime_error("send on connection " + std::to_string(index) + ": " +
                               (n < 0 ? errnoText() : "short write"));
    }
  }

  // One epoll_wait and its events; false once the deadline has passed.
  bool pollOnce(Clock::time_point deadline) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) {
      return false;
    }
    std::array<epoll_event, 1024> events{};
    const int n = ::epoll_wait(epoll_fd_, events.data(), static_cast<int>(events.size()),
                               static_cast<int>(std::min<long long>(left.count(), 100)));
    if (n < 0 && errno != EINTR) {
      throw std::runtime_error("epoll_wait: " + errnoText());
    }
    for (int i = 0; i < n; ++i) {
      handleEvent(events[static_cast<std::size_t>(i)].data.u64);
    }
    return true;
  }

  void handleEvent(std::size_t index) {
    Conn& conn = conns_[index];
    if (conn.state == ConnState::Connecting) {
      return finishConnect(index);
    }
    const std::size_t need = conn.state == ConnState::AwaitAdd ? 8 : 1;
    if (!readReply(index, need)) {
      return;
    }
    conn.have = 0;
    switch (conn.state) {
      case ConnState::Probing:
        conn.state = ConnState::Ready;
        ++ready_;
        break;
      case ConnState::AwaitAdd:
        onAddReply(index);
        break;
      case ConnState::AwaitStop:
        conn.state = ConnState::Done;
        ++done_;
        last_release_ = Clock::now();
        break;
      default:
        throw std::runtime_error("unexpected bytes on connection " + std::to_string(index));
    }
  }

  void finishConnect(std::size_t index) {
    int error = 0;
    socklen_t length = sizeof(error);
    ::getsockopt(conns_[index].fd, SOL_SOCKET, SO_ERROR, &error, &length);
    if (error != 0) {
      throw std::runtime_error("connect " + std::to_string(index) + ": " + std::strerror(error));
    }
    sendAll(index, requests_.probe);
    conns_[index].state = ConnState::Probing;
    watch(index, EPOLLIN, EPOLL_CTL_MOD);
  }

  // Reads toward a reply of `need` bytes; true once it is complete.
  bool readReply(std::size_t index, std::size_t need) {
    Conn& conn = conns_[index];
    const ssize_t n = ::recv(conn.fd, conn.buf.data() + conn.have, need - conn.have, 0);
    if (n == 0) {
      throw std::runtime_error("server closed connection " + std::to_string(index));
    }
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR) {
        return false;
      }
      throw std::runtime_error("recv on connection " + std::to_string(index) + ": " + errnoText());
    }
    conn.have = static_cast<std::uint8_t>(conn.have + n);
    return conn.have == need;
  }

  // The connection that brings the count to N opens the barrier, as
  // store_based_barrier-style code does: SET "go", then WAIT like everyone.
  void onAddReply(std::size_t index) {
    std::int64_t count = 0;
    std::memcpy(&count, conns_[index].buf.data(), sizeof(count));  // little-endian host
    sendAll(index, count == options_.connections ? requests_.set_and_wait : requests_.wait);
    conns_[index].state = ConnState::AwaitStop;
  }

  const BarrierOptions& options_;
  std::vector<Conn> conns_;
  Requests requests_;
  int epoll_fd_ = -1;
  int ready_ = 0;
  int done_ = 0;
  Clock::time_point last_release_{};
};

}  // namespace

BarrierResult runBarrier(const BarrierOptions& options) {
  BarrierResult result;
  result.connections = options.connections;
  auto serverCpu = [&options] {
    return options.server_cpu_seconds ? options.server_cpu_seconds() : 0.0;
  };
  const double server0 = serverCpu();
  const double self0 = processCpuSeconds();
  const double machine0 = machineBusySeconds();
  const auto start = Clock::now();
  try {
    BarrierRun run(options);
    run.connectAll(result);
    run.runBarrier(result);
  } catch (const std::exception& error) {
    result.error = error.what();
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  const double used =
      (machineBusySeconds() - machine0) - (serverCpu() - server0) - (processCpuSeconds() - self0);
  result.other_cpu = seconds > 0 ? std::max(0.0, used / seconds) : 0.0;
  return result;
}

}  // namespace ddprun::bench

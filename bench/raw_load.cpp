#include "raw_load.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "ddprun/proto/tcpstore_codec.hpp"
#include "machine.hpp"
#include "nonblocking_socket.hpp"

namespace ddprun::bench {
namespace {

using Clock = std::chrono::steady_clock;
namespace proto = ddprun::proto;

std::string encode(proto::Command command, std::vector<std::string_view> keys,
                   std::vector<std::string_view> values = {}, std::int64_t number = 0) {
  return proto::encodeRequest(
      proto::Dialect::Legacy113,
      proto::makeRequest(command, std::move(keys), std::move(values), number));
}

// One round trip: what is sent and how many reply bytes come back.
struct Step {
  std::string request;
  std::size_t reply_bytes = 0;
};

// The LibTorch 1.13 client's bytes for set, get, add and check: set has no
// reply, so like the real client it is followed at once by get's WAIT.
std::array<Step, 4> stepsFor(int id, const std::string& value) {
  const std::string key = "/raw/" + std::to_string(id);
  const std::string counter = key + "/n";
  return {{{encode(proto::Command::Set, {key}, {value}) + encode(proto::Command::Wait, {key}), 1},
           {encode(proto::Command::Get, {key}), 8 + value.size()},
           {encode(proto::Command::Add, {counter}, {}, 1), 8},
           {encode(proto::Command::Check, {key}), 1}}};
}

struct RawConn {
  int fd = -1;
  std::array<Step, 4> steps;
  std::size_t step = 0;
  std::size_t have = 0;
  Clock::time_point sent;
};

int connectBlocking(const std::string& host, std::uint16_t port) {
  const sockaddr_in server = ipv4Address(host, port);
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0 || ::connect(fd, reinterpret_cast<const sockaddr*>(&server), sizeof(server)) != 0) {
    const std::string why = errnoText();
    if (fd >= 0) {
      ::close(fd);
    }
    throw std::runtime_error("connect: " + why);
  }
  // Like LibTorch's client. The socket stays blocking: sends of tiny requests
  // never stall, and replies are read non-blocking when epoll says so. The
  // receive timeout only bounds the blocking probe in RawLoad's constructor.
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  timeval timeout{20, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  return fd;
}

// One CHECK [] round trip, so the server has accepted the connection before
// the load starts and the accept backlog stays out of the measurement.
void probe(int fd) {
  static const std::string request = encode(proto::Command::Check, {});
  char reply = 0;
  if (::send(fd, request.data(), request.size(), MSG_NOSIGNAL) !=
          static_cast<ssize_t>(request.size()) ||
      ::recv(fd, &reply, 1, MSG_WAITALL) != 1) {
    throw std::runtime_error("no reply to the probe within 20 s");
  }
}

class RawLoad {
 public:
  explicit RawLoad(const RawLoadOptions& options) : options_(options) {
    const std::string value(options.value_bytes, 'v');
    conns_.resize(static_cast<std::size_t>(options.connections));
    for (std::size_t i = 0; i < conns_.size(); ++i) {
      conns_[i].fd = connectBlocking(options.host, options.port);
    }
    for (std::size_t i = 0; i < conns_.size(); ++i) {
      probe(conns_[i].fd);
      conns_[i].steps = stepsFor(static_cast<int>(i), value);
      epoll_.add(conns_[i].fd, EPOLLIN, i);
    }
  }

  ~RawLoad() {
    for (auto& conn : conns_) {
      if (conn.fd >= 0) {
        ::close(conn.fd);
      }
    }
  }

  RawLoad(const RawLoad&) = delete;
  RawLoad& operator=(const RawLoad&) = delete;

  RawLoadResult run() {
    RawLoadResult result;
    result.connections = options_.connections;
    for (std::size_t i = 0; i < conns_.size(); ++i) {
      send(i);
    }
    serveUntil(Clock::now() + options_.warmup);
    const double server0 = options_.server_cpu_seconds ? options_.server_cpu_seconds() : 0;
    const double client0 = processCpuSeconds();
    const double machine0 = machineBusySeconds();
    const auto start = Clock::now();
    measuring_ = true;
    serveUntil(start + options_.duration);
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    const double server1 = options_.server_cpu_seconds ? options_.server_cpu_seconds() : 0;
    result.server_cpu = (server1 - server0) / seconds;
    result.client_cpu = (processCpuSeconds() - client0) / seconds;
    result.other_cpu = std::max(
        0.0, (machineBusySeconds() - machine0) / seconds - result.server_cpu - result.client_cpu);
    result.ops_per_second = static_cast<double>(latencies_ns_.size()) / seconds;
    result.p50_us = percentileUs(0.50);
    result.p99_us = percentileUs(0.99);
    if (latencies_ns_.empty()) {
      result.error = "no round trip completed in the measured window";
    }
    return result;
  }

 private:
  void send(std::size_t index) {
    RawConn& conn = conns_[index];
    const std::string& bytes = conn.steps[conn.step].request;
    conn.sent = Clock::now();
    if (::send(conn.fd, bytes.data(), bytes.size(), MSG_NOSIGNAL) !=
        static_cast<ssize_t>(bytes.size())) {
      throw std::runtime_error(std::string("send: ") + std::strerror(errno));
    }
  }

  void serveUntil(Clock::time_point end) {
    std::array<epoll_event, 1024> events{};
    while (Clock::now() < end) {
      const int n = epoll_.wait(events, 50);
      for (int i = 0; i < n; ++i) {
        onReadable(events[static_cast<std::size_t>(i)].data.u64);
      }
    }
  }

  void onReadable(std::size_t index) {
    RawConn& conn = conns_[index];
    const std::size_t need = conn.steps[conn.step].reply_bytes;
    const ssize_t n = ::recv(conn.fd, buffer_.data(), need - conn.have, MSG_DONTWAIT);
    if (n == 0) {
      throw std::runtime_error("server closed a connection");
    }
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR) {
        return;
      }
      throw std::runtime_error(std::string("recv: ") + std::strerror(errno));
    }
    conn.have += static_cast<std::size_t>(n);
    if (conn.have < need) {
      return;
    }
    if (measuring_) {
      latencies_ns_.push_back(
          std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - conn.sent).count());
    }
    conn.have = 0;
    conn.step = (conn.step + 1) % conn.steps.size();
    send(index);
  }

  double percentileUs(double fraction) {
    if (latencies_ns_.empty()) {
      return 0.0;
    }
    const auto index =
        static_cast<std::size_t>(fraction * static_cast<double>(latencies_ns_.size() - 1));
    std::nth_element(latencies_ns_.begin(),
                     latencies_ns_.begin() + static_cast<std::ptrdiff_t>(index),
                     latencies_ns_.end());
    return static_cast<double>(latencies_ns_[index]) / 1000.0;
  }

  const RawLoadOptions& options_;
  std::vector<RawConn> conns_;
  Epoll epoll_;
  bool measuring_ = false;
  std::vector<std::int64_t> latencies_ns_;
  std::array<char, 4096> buffer_{};
};

}  // namespace

RawLoadResult runRawLoad(const RawLoadOptions& options) {
  try {
    RawLoad load(options);
    return load.run();
  } catch (const std::exception& error) {
    RawLoadResult result;
    result.connections = options.connections;
    result.error = error.what();
    return result;
  }
}

}  // namespace ddprun::bench

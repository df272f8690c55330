#include "barrier.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "connection_limits.hpp"
#include "ddprun/proto/tcpstore_codec.hpp"
#include "ddprun/test_support/fd_limit.hpp"
#include "ddprun/test_support/proc_status.hpp"
#include "machine.hpp"
#include "nonblocking_socket.hpp"

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

// 16 bytes per connection: 100,000 of them cost the benchmark 1.6 MB.
struct Conn {
  int fd = -1;
  ConnState state = ConnState::Unused;
  std::uint8_t have = 0;  // bytes of the current reply received so far
  std::array<std::uint8_t, 8> buf{};
};

proto::Dialect dialectOf(BarrierBytes bytes) {
  return bytes == BarrierBytes::Torch2x ? proto::Dialect::Modern : proto::Dialect::Legacy113;
}

// The requests the barrier sends, pre-encoded once in the chosen bytes, and
// the size of the probe's reply.
struct Requests {
  explicit Requests(BarrierBytes bytes) : dialect(dialectOf(bytes)) {
    if (bytes == BarrierBytes::Torch2x) {
      // What a 2.5+ client sends on connect; PING's echo proves the server
      // has read both.
      probe = encode(proto::Command::Validate, {}, {}, 0, proto::kValidateMagic) +
              encode(proto::Command::Ping, {}, {}, 0, kPingNonce);
      probe_reply_bytes = 4;
    } else {
      probe = encode(proto::Command::Check, {});  // zero keys: READY at once
      probe_reply_bytes = 1;
    }
    add = encode(proto::Command::Add, {"barrier"}, {}, 1);
    wait = encode(proto::Command::Wait, {"go"});
    set_and_wait = encode(proto::Command::Set, {"go"}, {"1"}) + wait;
  }

  std::string encode(proto::Command command, std::vector<std::string_view> keys,
                     std::vector<std::string_view> values = {}, std::int64_t number = 0,
                     std::uint32_t word = 0) const {
    return proto::encodeRequest(
        dialect, proto::makeRequest(command, std::move(keys), std::move(values), number, word));
  }

  static constexpr std::uint32_t kPingNonce = 0x62617272;  // any value; the server echoes it
  proto::Dialect dialect;
  std::string probe;
  std::size_t probe_reply_bytes = 1;
  std::string add;
  std::string wait;
  std::string set_and_wait;
};

double secondsBetween(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

// "60 s", "0.25 s": a deadline as the result's error states it.
std::string secondsText(std::chrono::milliseconds deadline) {
  std::ostringstream out;
  out << static_cast<double>(deadline.count()) / 1000.0 << " s";
  return out.str();
}

// One barrier run's connections and epoll loop. Used by one thread.
class BarrierRun {
 public:
  BarrierRun(const BarrierOptions& options, BarrierResult& result)
      : options_(options),
        result_(result),
        requests_(options.bytes),
        conns_(static_cast<std::size_t>(options.connections)),
        server_(ipv4Address(options.host, options.port)) {}

  ~BarrierRun() {
    for (auto& conn : conns_) {
      if (conn.fd >= 0) {
        ::close(conn.fd);
      }
    }
  }

  BarrierRun(const BarrierRun&) = delete;
  BarrierRun& operator=(const BarrierRun&) = delete;

  // Connects every connection, at most the window in flight; each counts as
  // connected once the server has answered its probe. False at the deadline.
  bool connectAll() {
    start_ = Clock::now();
    const auto deadline = start_ + options_.connect_timeout;
    std::size_t next = 0;
    int in_flight = 0;
    while (result_.connected < options_.connections) {
      for (; in_flight < result_.connect_window && next < conns_.size(); ++next, ++in_flight) {
        connectOne(next);
      }
      const int before = result_.connected;
      const bool in_time = pollOnce(deadline);
      in_flight -= result_.connected - before;
      if (!in_time) {
        result_.connect_seconds = secondsBetween(start_, Clock::now());
        result_.error = "connected " + std::to_string(result_.connected) + " of " +
                        std::to_string(options_.connections) + " in " +
                        secondsText(options_.connect_timeout);
        return false;
      }
    }
    result_.connect_seconds = secondsBetween(start_, Clock::now());
    return true;
  }

  // Sends every ADD, then serves replies until all are released or time is
  // up. False at the deadline.
  bool releaseAll() {
    const auto barrier_start = Clock::now();
    const auto deadline = barrier_start + options_.barrier_timeout;
    for (std::size_t i = 0; i < conns_.size(); ++i) {
      sendAll(i, requests_.add);
      conns_[i].state = ConnState::AwaitAdd;
    }
    while (result_.released < options_.connections) {
      if (!pollOnce(deadline)) {
        result_.error = "released " + std::to_string(result_.released) + " of " +
                        std::to_string(options_.connections) + " in " +
                        secondsText(options_.barrier_timeout);
        return false;
      }
    }
    result_.barrier_seconds = secondsBetween(barrier_start, last_release_);
    result_.total_seconds = secondsBetween(start_, last_release_);
    return true;
  }

 private:
  // Spreads connections over 127.0.0.1.. so each source address has its own
  // ephemeral port range.
  void connectOne(std::size_t index) {
    const std::uint32_t source =
        result_.source_addresses > 1 ? loopbackSource(index, result_.source_addresses) : 0;
    try {
      conns_[index].fd = startConnect(server_, source);
    } catch (const std::runtime_error& error) {
      throw std::runtime_error("connection " + std::to_string(index) + ": " + error.what());
    }
    conns_[index].state = ConnState::Connecting;
    epoll_.add(conns_[index].fd, EPOLLOUT, index);
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
    const int n = epoll_.wait(events, static_cast<int>(std::min<long long>(left.count(), 100)));
    for (int i = 0; i < n; ++i) {
      handleEvent(events[static_cast<std::size_t>(i)].data.u64);
    }
    return true;
  }

  std::size_t replyBytes(ConnState state) const {
    switch (state) {
      case ConnState::Probing:
        return requests_.probe_reply_bytes;
      case ConnState::AwaitAdd:
        return 8;
      default:
        return 1;
    }
  }

  void handleEvent(std::size_t index) {
    Conn& conn = conns_[index];
    if (conn.state == ConnState::Connecting) {
      return finishConnect(index);
    }
    if (!readReply(index, replyBytes(conn.state))) {
      return;
    }
    conn.have = 0;
    switch (conn.state) {
      case ConnState::Probing:
        checkProbeReply(index);
        conn.state = ConnState::Ready;
        ++result_.connected;
        break;
      case ConnState::AwaitAdd:
        onAddReply(index);
        break;
      case ConnState::AwaitStop:
        conn.state = ConnState::Done;
        ++result_.released;
        last_release_ = Clock::now();
        break;
      default:
        throw std::runtime_error("unexpected bytes on connection " + std::to_string(index));
    }
  }

  void finishConnect(std::size_t index) {
    if (const int error = socketError(conns_[index].fd); error != 0) {
      throw std::runtime_error("connect " + std::to_string(index) + ": " + std::strerror(error));
    }
    sendAll(index, requests_.probe);
    conns_[index].state = ConnState::Probing;
    epoll_.modify(conns_[index].fd, EPOLLIN, index);
  }

  void checkProbeReply(std::size_t index) const {
    if (requests_.probe_reply_bytes != 4) {
      return;
    }
    std::uint32_t echo = 0;
    std::memcpy(&echo, conns_[index].buf.data(), sizeof(echo));  // little-endian host
    if (echo != Requests::kPingNonce) {
      throw std::runtime_error("PING on connection " + std::to_string(index) +
                               " was answered with another nonce");
    }
  }

  // Reads toward a reply of `need` bytes; true once it is complete.
  bool readReply(std::size_t index, std::size_t need) {
    Conn& conn = conns_[index];
    const ssize_t n = ::recv(conn.fd, conn.buf.data() + conn.have, need - conn.have, 0);
    if (n == 0) {
      throw std::runtime_error("the server closed connection " + std::to_string(index));
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
  BarrierResult& result_;
  const Requests requests_;
  std::vector<Conn> conns_;
  const sockaddr_in server_;
  Epoll epoll_;
  Clock::time_point start_{};
  Clock::time_point last_release_{};
};

std::size_t serverKiB(pid_t pid, const char* field) {
  return pid > 0 ? test_support::procStatusKiB(pid, field).value_or(0) : 0;
}

double serverCpu(pid_t pid) { return pid > 0 ? test_support::cpuSecondsOf(pid) : 0.0; }

// CPU readings from the first connect on: the server's, ours, the machine's.
struct CpuBaseline {
  explicit CpuBaseline(pid_t server_pid)
      : server(serverCpu(server_pid)), self(processCpuSeconds()), machine(machineBusySeconds()) {}
  double server;
  double self;
  double machine;
  Clock::time_point start = Clock::now();
};

// The server's peak memory and the CPU figures, read while every connection
// is still open: closing 100,000 of them costs the server time of its own.
void recordEnd(const BarrierOptions& options, const CpuBaseline& baseline, BarrierResult& result) {
  result.peak_rss_kib = serverKiB(options.server_pid, "VmHWM");
  result.server_cpu_seconds = serverCpu(options.server_pid) - baseline.server;
  result.client_cpu_seconds = processCpuSeconds() - baseline.self;
  const double seconds = secondsBetween(baseline.start, Clock::now());
  const double used = (machineBusySeconds() - baseline.machine) - result.server_cpu_seconds -
                      result.client_cpu_seconds;
  result.other_cpu = seconds > 0 ? std::max(0.0, used / seconds) : 0.0;
}

// Connects, then runs the barrier if everyone connected; the server's memory
// is read before, between the two, and at the end.
void connectAndRelease(const BarrierOptions& options, BarrierResult& result) {
  // Running out of fds midway would also leave none to read /proc with.
  const std::uint64_t limit = test_support::currentFdLimit().soft;
  if (limit < static_cast<std::uint64_t>(options.connections) + kFdsBesideConnections) {
    throw std::runtime_error("not run: " + std::to_string(options.connections) +
                             " connections need more fds than the limit of " +
                             std::to_string(limit));
  }
  result.rss_before_kib = serverKiB(options.server_pid, "VmRSS");
  BarrierRun run(options, result);
  const CpuBaseline baseline(options.server_pid);
  try {
    if (run.connectAll()) {
      result.rss_connected_kib = serverKiB(options.server_pid, "VmRSS");
      run.releaseAll();
    }
  } catch (const std::exception& error) {
    result.error = error.what();
  }
  recordEnd(options, baseline, result);
}

}  // namespace

std::string barrierBytesName(BarrierBytes bytes) {
  return bytes == BarrierBytes::Torch2x ? "2.x" : "1.13";
}

double BarrierResult::rssPerConnectionBytes() const {
  if (!allConnected() || rss_connected_kib == 0 || rss_connected_kib < rss_before_kib) {
    return 0.0;
  }
  return static_cast<double>(rss_connected_kib - rss_before_kib) * 1024.0 / connections;
}

BarrierResult runBarrier(const BarrierOptions& options) {
  BarrierResult result;
  result.connections = options.connections;
  result.bytes = options.bytes;
  result.connect_window = connectWindowFor(options.connect_window);
  result.source_addresses = options.source_addresses > 0 ? options.source_addresses
                                                         : sourceAddressesFor(options.connections);
  try {
    connectAndRelease(options, result);
  } catch (const std::exception& error) {
    result.error = error.what();  // no epoll instance, or a bad host
  }
  return result;
}

}  // namespace ddprun::bench

// Plain POSIX sockets with poll() deadlines: the client is used from simple
// blocking code (the launcher's main thread, tests), where an event loop
// would add nothing.
#include "ddprun/rendezvous/client.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "ddprun/proto/errors.hpp"
#include "ddprun/proto/tcpstore_codec.hpp"

namespace ddprun::rdzv {
namespace {

using Clock = std::chrono::steady_clock;
using proto::Command;
using proto::makeRequest;

int remainingMs(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return left.count() <= 0 ? 0 : static_cast<int>(std::min<long>(left.count(), 1 << 30));
}

// One connect attempt to any address of host:port; returns -1 and sets
// `error` on failure.
// connect() bounded by `deadline`: a host that drops SYNs would otherwise
// hold a blocking connect for minutes (tcp_syn_retries), past every timeout.
bool connectBefore(int fd, const sockaddr* address, socklen_t length, Clock::time_point deadline,
                   std::string& error) {
  const int flags = ::fcntl(fd, F_GETFL);
  ::fcntl(fd, F_SETFL, flags | O_NONBLOCK);
  int result = ::connect(fd, address, length);
  if (result != 0 && errno == EINPROGRESS) {
    pollfd pfd{fd, POLLOUT, 0};
    int ready = 0;
    do {
      ready = ::poll(&pfd, 1, remainingMs(deadline));
    } while (ready < 0 && errno == EINTR);
    int socket_error = ETIMEDOUT;
    socklen_t size = sizeof(socket_error);
    if (ready > 0) {
      ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &socket_error, &size);
    }
    errno = socket_error;
    result = socket_error == 0 ? 0 : -1;
  }
  if (result != 0) {
    error = std::strerror(errno);
    return false;
  }
  ::fcntl(fd, F_SETFL, flags);  // blocking again: reads and writes poll with deadlines
  return true;
}

int tryConnect(const std::string& host, std::uint16_t port, Clock::time_point deadline,
               std::string& error) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* results = nullptr;
  const std::string service = std::to_string(port);
  if (const int rc = getaddrinfo(host.c_str(), service.c_str(), &hints, &results); rc != 0) {
    error = gai_strerror(rc);
    return -1;
  }
  int fd = -1;
  for (addrinfo* ai = results; ai != nullptr && fd < 0; ai = ai->ai_next) {
    fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd >= 0 && !connectBefore(fd, ai->ai_addr, ai->ai_addrlen, deadline, error)) {
      ::close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(results);
  if (fd >= 0) {
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  }
  return fd;
}

proto::Request pingRequest() {
  proto::Request request = makeRequest(Command::Ping);
  request.word = static_cast<std::uint32_t>(::getpid());
  return request;
}

std::vector<std::string_view> views(const std::vector<std::string>& strings) {
  return {strings.begin(), strings.end()};
}

}  // namespace

StoreClient::StoreClient(const std::string& host, std::uint16_t port, Duration timeout,
                         Connect connect)
    : timeout_(timeout), peer_(host + ":" + std::to_string(port)) {
  connectWithRetry(host, port, timeout, connect);
}

StoreClient::~StoreClient() {
  if (fd_ >= 0) {
    ::close(fd_);
  }
}

void StoreClient::connectWithRetry(const std::string& host, std::uint16_t port, Duration timeout,
                                   Connect connect) {
  const auto give_up = Clock::now() + timeout;
  auto backoff = std::chrono::milliseconds(10);
  std::string error;
  while (true) {
    fd_ = tryConnect(host, port, give_up, error);
    if (fd_ >= 0) {
      break;
    }
    if (connect == Connect::kOnce) {
      throw NetworkError("cannot connect to " + peer_ + ": " + error);
    }
    if (Clock::now() + backoff >= give_up) {
      throw TimeoutError("cannot connect to the store at " + peer_ + " within " +
                         std::to_string(timeout.count()) + " ms: " + error);
    }
    std::this_thread::sleep_for(backoff);  // retry backoff while the server starts
    backoff = std::min(backoff * 2, std::chrono::milliseconds(500));
  }
  // VALIDATE and PING go out together, as PyTorch 2.5+ sends them.
  proto::Request validate = makeRequest(Command::Validate);
  validate.word = proto::kValidateMagic;
  proto::Request ping = pingRequest();
  out_.clear();
  proto::encodeRequest(proto::Dialect::Modern, validate, out_);
  proto::encodeRequest(proto::Dialect::Modern, ping, out_);
  sendAll(out_);
  expectPingEcho(ping.word, deadline());
}

void StoreClient::send(const proto::Request& request) {
  out_.clear();
  proto::encodeRequest(proto::Dialect::Modern, request, out_);
  sendAll(out_);
}

Clock::time_point StoreClient::deadline() const { return Clock::now() + timeout_; }

void StoreClient::sendAll(std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t sent = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (sent < 0 && errno == EINTR) {
      continue;
    }
    if (sent <= 0) {
      throw NetworkError("cannot send to the store at " + peer_ + ": " + std::strerror(errno));
    }
    bytes.remove_prefix(static_cast<std::size_t>(sent));
  }
}

void StoreClient::recvExact(char* data, std::size_t size, Clock::time_point deadline) {
  while (size > 0) {
    pollfd pfd{fd_, POLLIN, 0};
    const int ready = ::poll(&pfd, 1, remainingMs(deadline));
    if (ready == 0) {
      throw TimeoutError("the store at " + peer_ + " did not answer in time");
    }
    if (ready < 0 && errno == EINTR) {
      continue;
    }
    const ssize_t got = ::recv(fd_, data, size, 0);
    if (got < 0 && errno == EINTR) {
      continue;
    }
    if (got <= 0) {
      throw NetworkError("the store at " + peer_ + " closed the connection" +
                         (got < 0 ? std::string(": ") + std::strerror(errno) : std::string()));
    }
    data += got;
    size -= static_cast<std::size_t>(got);
  }
}

std::uint8_t StoreClient::recvU8() {
  std::uint8_t value = 0;
  recvExact(reinterpret_cast<char*>(&value), sizeof(value), deadline());
  return value;
}

std::int64_t StoreClient::recvI64() {
  std::int64_t value = 0;
  recvExact(reinterpret_cast<char*>(&value), sizeof(value), deadline());
  return value;
}

std::string StoreClient::recvBytes() {
  const auto length = static_cast<std::uint64_t>(recvI64());
  if (length > proto::Limits{}.max_value_bytes) {
    throw StoreError("the store at " + peer_ + " sent a " + std::to_string(length) +
                     "-byte value, over the limit");
  }
  std::string value(static_cast<std::size_t>(length), '\0');
  recvExact(value.data(), value.size(), deadline());
  return value;
}

void StoreClient::ping() {
  sendPing();
  awaitPing(timeout_);
}

void StoreClient::sendPing() { send(pingRequest()); }

void StoreClient::awaitPing(Duration timeout) {
  expectPingEcho(pingRequest().word, Clock::now() + timeout);
}

void StoreClient::expectPingEcho(std::uint32_t nonce, Clock::time_point deadline) {
  std::uint32_t echo = 0;
  recvExact(reinterpret_cast<char*>(&echo), sizeof(echo), deadline);
  if (echo != nonce) {
    throw StoreError("the store at " + peer_ + " answered PING with the wrong nonce");
  }
}

void StoreClient::set(std::string_view key, std::string_view value) {
  send(makeRequest(Command::Set, {key}, {value}));
}

std::string StoreClient::get(std::string_view key) {
  wait({std::string(key)});
  send(makeRequest(Command::Get, {key}));
  return recvBytes();
}

std::string StoreClient::query(std::string_view key) {
  send(makeRequest(Command::Get, {key}));
  return recvBytes();
}

std::int64_t StoreClient::add(std::string_view key, std::int64_t delta) {
  proto::Request request = makeRequest(Command::Add, {key});
  request.number = delta;
  send(request);
  return recvI64();
}

std::string StoreClient::compareSet(std::string_view key, std::string_view expected,
                                    std::string_view desired) {
  send(makeRequest(Command::CompareSet, {key}, {expected, desired}));
  return recvBytes();
}

bool StoreClient::check(const std::vector<std::string>& keys) {
  send(makeRequest(Command::Check, views(keys)));
  return recvU8() == static_cast<std::uint8_t>(proto::CheckResponse::Ready);
}

void StoreClient::wait(const std::vector<std::string>& keys, std::optional<Duration> timeout) {
  send(makeRequest(Command::Wait, views(keys)));
  std::uint8_t response = 0;
  try {
    recvExact(reinterpret_cast<char*>(&response), 1, Clock::now() + timeout.value_or(timeout_));
    return;
  } catch (const TimeoutError&) {
  }
  // Deadline passed: cancel on the server, then drain a STOP_WAITING that
  // may have crossed our CANCEL_WAIT, so the stream stays in step.
  send(makeRequest(Command::CancelWait));
  if (recvU8() == static_cast<std::uint8_t>(proto::WaitResponse::StopWaiting) &&
      recvU8() != static_cast<std::uint8_t>(proto::WaitResponse::WaitCanceled)) {
    throw StoreError("the store at " + peer_ + " did not answer CANCEL_WAIT");
  }
  std::string names;
  for (const auto& key : keys) {
    names += (names.empty() ? "" : ", ") + key;
  }
  throw TimeoutError("waited " + std::to_string(timeout.value_or(timeout_).count()) +
                     " ms for keys [" + names + "] at the store at " + peer_);
}

bool StoreClient::deleteKey(std::string_view key) {
  send(makeRequest(Command::DeleteKey, {key}));
  return recvI64() == 1;
}

std::int64_t StoreClient::numKeys() {
  send(makeRequest(Command::GetNumKeys));
  return recvI64();
}

void StoreClient::append(std::string_view key, std::string_view value) {
  send(makeRequest(Command::Append, {key}, {value}));
}

std::vector<std::string> StoreClient::multiGet(const std::vector<std::string>& keys) {
  wait(keys);
  send(makeRequest(Command::MultiGet, views(keys)));
  std::vector<std::string> values;
  for (std::size_t i = 0; i < keys.size(); ++i) {
    values.push_back(recvBytes());
  }
  return values;
}

void StoreClient::multiSet(const std::vector<std::string>& keys,
                           const std::vector<std::string>& values) {
  send(makeRequest(Command::MultiSet, views(keys), views(values)));
}

std::vector<std::string> StoreClient::listKeys() {
  send(makeRequest(Command::List));
  const std::int64_t count = recvI64();
  std::vector<std::string> keys;
  for (std::int64_t i = 0; i < count; ++i) {
    keys.push_back(recvBytes());
  }
  return keys;
}

void StoreClient::interrupt() { ::shutdown(fd_, SHUT_RDWR); }

std::string StoreClient::localAddress() const {
  sockaddr_storage address{};
  socklen_t length = sizeof(address);
  if (::getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    throw NetworkError("store client " + peer_ + ": getsockname failed: " + std::strerror(errno));
  }
  // getnameinfo keeps a link-local address's zone ("fe80::12%eth0"), without
  // which no other host can reach it.
  char text[NI_MAXHOST] = {};
  const int failed = ::getnameinfo(reinterpret_cast<const sockaddr*>(&address), length, text,
                                   sizeof(text), nullptr, 0, NI_NUMERICHOST);
  if (failed != 0) {
    throw NetworkError("store client " + peer_ + ": getnameinfo failed: " + gai_strerror(failed));
  }
  return text;
}

}  // namespace ddprun::rdzv

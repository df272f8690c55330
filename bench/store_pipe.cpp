#include "store_pipe.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "ddprun/proto/tcpstore_codec.hpp"
#include "nonblocking_socket.hpp"

namespace ddprun::bench {
namespace {

namespace proto = ddprun::proto;
using proto::Command;

void encode(std::string& out, const proto::Request& request) {
  proto::encodeRequest(proto::Dialect::Modern, request, out);
}

std::uint64_t readU64(const char* bytes) {
  std::uint64_t value = 0;
  std::memcpy(&value, bytes, sizeof(value));  // little-endian, as the wire and the host
  return value;
}

}  // namespace

StorePipe::~StorePipe() { close(); }

StorePipe::StorePipe(StorePipe&& other) noexcept
    : fd_(other.fd_),
      out_(std::move(other.out_)),
      sent_(other.sent_),
      in_(std::move(other.in_)),
      expected_(std::move(other.expected_)) {
  other.fd_ = -1;
}

void StorePipe::close() {
  if (fd_ >= 0) {
    ::close(fd_);
    fd_ = -1;
  }
}

void StorePipe::handshake(std::uint32_t nonce, std::uint8_t tag) {
  encode(out_, proto::makeRequest(Command::Validate, {}, {}, 0, proto::kValidateMagic));
  ping(nonce, tag);
}

void StorePipe::set(std::string_view key, std::string_view value) {
  encode(out_, proto::makeRequest(Command::Set, {key}, {value}));
}

void StorePipe::ping(std::uint32_t nonce, std::uint8_t tag) {
  encode(out_, proto::makeRequest(Command::Ping, {}, {}, 0, nonce));
  expected_.push_back({Kind::kEcho, tag, nonce});
}

void StorePipe::wait(std::string_view key, std::uint8_t tag) {
  encode(out_, proto::makeRequest(Command::Wait, {key}));
  expected_.push_back({Kind::kWaitDone, tag, 0});
}

void StorePipe::get(std::string_view key, std::uint8_t tag) {
  encode(out_, proto::makeRequest(Command::Get, {key}));
  expected_.push_back({Kind::kValue, tag, 0});
}

bool StorePipe::flush() {
  while (sent_ < out_.size()) {
    const ssize_t n = ::send(fd_, out_.data() + sent_, out_.size() - sent_, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR) {
        return errno == EAGAIN;
      }
      throw std::runtime_error("send: " + errnoText());
    }
    sent_ += static_cast<std::size_t>(n);
  }
  out_.clear();
  sent_ = 0;
  return false;
}

bool StorePipe::receive(const std::function<void(const PipeReply&)>& on_reply) {
  static thread_local std::array<char, 64 * 1024> buffer;
  for (;;) {
    const ssize_t n = ::recv(fd_, buffer.data(), buffer.size(), 0);
    if (n == 0) {
      return false;
    }
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR) {
        return true;
      }
      if (errno == ECONNRESET) {
        return false;
      }
      throw std::runtime_error("recv: " + errnoText());
    }
    in_.append(buffer.data(), static_cast<std::size_t>(n));
    in_.erase(0, parse(on_reply));
    if (fd_ < 0 || static_cast<std::size_t>(n) < buffer.size()) {
      // Closed by a reply's handler, or drained: level-triggered epoll says
      // when more comes.
      return true;
    }
  }
}

// Hands over the complete replies at the front of in_; the bytes they took.
std::size_t StorePipe::parse(const std::function<void(const PipeReply&)>& on_reply) {
  std::size_t used = 0;
  std::size_t answered = 0;
  while (used < in_.size() && fd_ >= 0) {  // a handler may close this pipe
    if (answered == expected_.size()) {
      throw std::runtime_error("the server sent bytes nothing asked for");
    }
    const Expected& next = expected_[answered];
    const char* at = in_.data() + used;
    const std::size_t have = in_.size() - used;
    PipeReply reply{next.tag, {}};
    std::size_t size = 0;
    if (next.kind == Kind::kEcho) {
      if (have < 4) {
        break;
      }
      std::uint32_t echo = 0;
      std::memcpy(&echo, at, sizeof(echo));
      if (echo != next.nonce) {
        throw std::runtime_error("PING answered with the wrong nonce");
      }
      size = 4;
    } else if (next.kind == Kind::kWaitDone) {
      if (static_cast<std::uint8_t>(at[0]) !=
          static_cast<std::uint8_t>(proto::WaitResponse::StopWaiting)) {
        throw std::runtime_error("WAIT answered with something other than STOP_WAITING");
      }
      size = 1;
    } else {
      if (have < 8) {
        break;
      }
      const std::uint64_t length = readU64(at);
      if (length > proto::Limits{}.max_value_bytes) {
        throw std::runtime_error("a GET answered with a " + std::to_string(length) +
                                 "-byte value, over the limit");
      }
      if (have < 8 + length) {
        break;
      }
      reply.value = std::string_view(at + 8, static_cast<std::size_t>(length));
      size = 8 + static_cast<std::size_t>(length);
    }
    // The callback may queue requests (and so grow expected_): advance first.
    used += size;
    ++answered;
    on_reply(reply);
  }
  expected_.erase(expected_.begin(), expected_.begin() + static_cast<std::ptrdiff_t>(answered));
  return used;
}

}  // namespace ddprun::bench

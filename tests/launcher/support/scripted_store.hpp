// ScriptedStore: a TCPStore server on 127.0.0.1 (a port the kernel chose)
// that answers each GET with the value scripted for its key ("" when none),
// each CHECK with not-ready and each PING with its nonce: what a test points
// `ddprun status` at to see how it shows answers no real rendezvous sends.
// It owns its listening socket and one thread, which serves one connection
// at a time; the destructor stops and joins it (an eventfd wakes it).
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <map>
#include <string>
#include <system_error>
#include <thread>

#include "ddprun/proto/tcpstore_codec.hpp"

namespace ddprun::launcher::testing {

class ScriptedStore {
 public:
  using Answers = std::map<std::string, std::string>;  // a GET's key: its value

  explicit ScriptedStore(Answers answers) : answers_(std::move(answers)) {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof(address);
    auto* any = reinterpret_cast<sockaddr*>(&address);
    if (listen_fd_ < 0 || ::bind(listen_fd_, any, sizeof(address)) != 0 ||
        ::listen(listen_fd_, 16) != 0 || ::getsockname(listen_fd_, any, &length) != 0) {
      throw std::system_error(errno, std::generic_category(), "ScriptedStore: listen");
    }
    port_ = ntohs(address.sin_port);
    thread_ = std::thread([this] { serve(); });
  }

  ~ScriptedStore() {
    const std::uint64_t one = 1;
    [[maybe_unused]] const ssize_t written = ::write(stop_fd_, &one, sizeof(one));
    thread_.join();
    ::close(listen_fd_);
    ::close(stop_fd_);
  }

  ScriptedStore(const ScriptedStore&) = delete;
  ScriptedStore& operator=(const ScriptedStore&) = delete;

  std::uint16_t port() const { return port_; }

 private:
  // Whether `fd` became readable before the store was stopped.
  bool readable(int fd) const {
    pollfd fds[2] = {{fd, POLLIN, 0}, {stop_fd_, POLLIN, 0}};
    while (::poll(fds, 2, -1) < 0 && errno == EINTR) {
    }
    return (fds[1].revents & POLLIN) == 0;
  }

  void serve() {
    while (readable(listen_fd_)) {
      const int client = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (client >= 0) {
        serveConnection(client);
        ::close(client);
      }
    }
  }

  void serveConnection(int fd) {
    proto::RequestDecoder decoder;
    proto::Request request;
    std::string input;
    char chunk[4096];
    while (readable(fd)) {
      const ssize_t got = ::recv(fd, chunk, sizeof(chunk), 0);
      if (got <= 0) {
        return;
      }
      input.append(chunk, static_cast<std::size_t>(got));
      for (;;) {
        const proto::DecodeResult result = decoder.decode(input, request);
        if (result.status == proto::DecodeStatus::Bad) {
          return;
        }
        if (result.status == proto::DecodeStatus::NeedMore) {
          break;
        }
        const std::string reply = answer(request);
        if (::send(fd, reply.data(), reply.size(), MSG_NOSIGNAL) !=
            static_cast<ssize_t>(reply.size())) {
          return;
        }
        input.erase(0, result.size);
      }
    }
  }

  std::string answer(const proto::Request& request) const {
    std::string out;
    proto::WireWriter writer(out);
    if (request.command == proto::Command::Ping) {
      writer.u32(request.word);
    } else if (request.command == proto::Command::Get) {
      const auto found = answers_.find(std::string(request.keys.at(0)));
      writer.bytes(found == answers_.end() ? std::string_view() : found->second);
    } else if (request.command == proto::Command::Check) {
      writer.u8(static_cast<std::uint8_t>(proto::CheckResponse::NotReady));
    }  // VALIDATE has no reply
    return out;
  }

  const Answers answers_;
  int listen_fd_ = -1;
  const int stop_fd_ = ::eventfd(0, EFD_CLOEXEC);
  std::uint16_t port_ = 0;
  std::thread thread_;
};

}  // namespace ddprun::launcher::testing

// RawConnection owns one blocking IPv4 TCP client socket to 127.0.0.1:<port>
// (TCP_NODELAY, so each sendAll() leaves as its own segment where the kernel
// allows) plus the bytes received but not yet handed to the test. It speaks
// no protocol: tests write exact wire bytes and compare exact replies. Used
// by one test thread at a time; move-only.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace ddprun::test_support {

class RawConnection {
 public:
  using Millis = std::chrono::milliseconds;

  // Connects or throws std::system_error.
  explicit RawConnection(std::uint16_t port);
  ~RawConnection();

  RawConnection(RawConnection&& other) noexcept;
  RawConnection& operator=(RawConnection&& other) noexcept;
  RawConnection(const RawConnection&) = delete;
  RawConnection& operator=(const RawConnection&) = delete;

  // Writes every byte (MSG_NOSIGNAL: a peer that already closed yields false,
  // never SIGPIPE). False once the peer has reset or closed the connection.
  bool sendAll(std::string_view bytes);

  // Exactly `n` bytes, or nullopt if they did not all arrive within `timeout`
  // (or the peer closed first). A partial read stays buffered; see buffered().
  std::optional<std::string> recvExact(std::size_t n, Millis timeout);

  // True once the peer has closed (EOF) or reset the connection within
  // `timeout`. Bytes that arrive meanwhile are kept in buffered().
  bool waitForClose(Millis timeout);

  // True if at least one unread byte is (or becomes, within `timeout`)
  // available. EOF alone does not count.
  bool bytesAvailableWithin(Millis timeout);

  // Received bytes not yet returned by recvExact(), for failure messages.
  const std::string& buffered() const { return buffer_; }

  // Half-closes: the peer reads EOF, and we can still read its replies.
  void shutdownWrite();
  void close();

  // Our end's address as the peer sees it, e.g. "127.0.0.1:51324"; the port
  // alone is what log lines are matched on.
  std::uint16_t localPort() const { return local_port_; }
  std::string localAddress() const;
  bool peerClosed() const { return peer_closed_; }

 private:
  // One recv() after waiting up to `timeout` for readability; false on
  // timeout, EOF or error (EOF and errors set peer_closed_).
  bool readSome(Millis timeout);

  int fd_ = -1;
  std::uint16_t local_port_ = 0;
  bool peer_closed_ = false;
  std::string buffer_;
};

}  // namespace ddprun::test_support

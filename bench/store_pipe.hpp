// One non-blocking TCPStore connection driven from an event loop, speaking
// the 2.2+ dialect with the bytes rdzv::StoreClient sends (proto's encoder):
// VALIDATE and PING first, then requests. Requests are buffered and written
// when the caller flushes; replies are parsed in the order their requests
// went out, each handed back with the tag the caller gave its request.
// Owns its socket (closed on destruction or close()); used by the thread
// that runs the loop.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace ddprun::bench {

// A reply, as parsed: `value` for a GET (valid during the callback only).
struct PipeReply {
  std::uint8_t tag = 0;
  std::string_view value;
};

class StorePipe {
 public:
  StorePipe() = default;
  ~StorePipe();
  StorePipe(StorePipe&& other) noexcept;
  StorePipe& operator=(StorePipe&&) = delete;
  StorePipe(const StorePipe&) = delete;
  StorePipe& operator=(const StorePipe&) = delete;

  // Takes a socket whose connect is under way.
  void attach(int fd) { fd_ = fd; }
  int fd() const { return fd_; }
  bool open() const { return fd_ >= 0; }
  void close();

  // Each request appends its bytes; `tag` marks its reply.
  // VALIDATE then PING, as StoreClient's constructor sends them.
  void handshake(std::uint32_t nonce, std::uint8_t tag);
  void set(std::string_view key, std::string_view value);  // no reply
  void ping(std::uint32_t nonce, std::uint8_t tag);        // echoes the nonce
  void wait(std::string_view key, std::uint8_t tag);       // STOP_WAITING once it exists
  void get(std::string_view key, std::uint8_t tag);        // the value

  // Writes what is buffered; true while bytes remain (the socket is full).
  // Throws std::runtime_error on a broken connection.
  bool flush();
  bool pending() const { return sent_ < out_.size(); }

  // Reads what has arrived and hands over every complete reply in order.
  // False once the server closed the connection. Throws std::runtime_error
  // for a reply that is not what was asked (a wrong echo, a canceled wait).
  bool receive(const std::function<void(const PipeReply&)>& on_reply);

 private:
  enum class Kind : std::uint8_t { kEcho, kWaitDone, kValue };
  struct Expected {
    Kind kind;
    std::uint8_t tag;
    std::uint32_t nonce;
  };

  std::size_t parse(const std::function<void(const PipeReply&)>& on_reply);

  int fd_ = -1;
  std::string out_;
  std::size_t sent_ = 0;
  std::string in_;
  std::vector<Expected> expected_;  // oldest first; a handful at most
};

}  // namespace ddprun::bench

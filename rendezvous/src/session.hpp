// One client connection of the store server.
//
// Owns the socket, the bytes of a request not yet complete (nothing while the
// connection is idle: reads go to the thread's shared buffer), the decoder
// (and so the connection's dialect) and the queue of bytes waiting to be
// written. Runs on its own
// io_context's single thread: every socket operation, the read loop, the
// write loop and the request timer run there. deliver() is the one entry
// point called from other threads (with the store lock held), for WAIT
// completions and watch notifications caused by other clients.
//
// Lifetime: the SessionRegistry holds a shared_ptr from start() until
// close(); each pending handler holds another.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ddprun/net/asio.hpp"
#include "ddprun/proto/tcpstore_codec.hpp"
#include "ddprun/rendezvous/key_space.hpp"
#include "ddprun/rendezvous/rendezvous_service.hpp"
#include "store_metrics.hpp"

namespace ddprun::rdzv {

class SessionRegistry;
class StoreState;

// What every session of one server shares.
struct SessionContext {
  std::mutex& store_mutex;  // guards the StoreState, the SessionRegistry and the rendezvous
  StoreState& state;
  SessionRegistry& registry;
  RendezvousService& rendezvous;
  std::function<void()> rendezvous_changed;  // after a rendezvous change; never blocks
  proto::Limits limits;
  proto::Dialect legacy_dialect;
  std::chrono::milliseconds request_timeout;
};

// Per-thread connection counts, which the server balances new connections by,
// what the thread's sessions count for the metrics, and the one read buffer
// they share (used only inside one read's handler on that thread, so no
// session holds it while waiting).
struct ThreadLoad {
  static constexpr std::size_t kReadBufferBytes = 64 * 1024;

  std::atomic<int> connections{0};
  std::atomic<int> active{0};  // connections that have sent at least one request
  ThreadMetrics metrics;       // written by this thread's sessions only
  // Left unwritten until a read fills it: zeroed, its 16 pages were faulted
  // in at every start of the agent's standalone store.
  std::unique_ptr<char[]> read_buffer = std::make_unique_for_overwrite<char[]>(kReadBufferBytes);
};

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(net::tcp::socket socket, ClientId id, std::string peer, const SessionContext& context,
          ThreadLoad& load);

  ClientId id() const { return id_; }
  const std::string& peer() const { return peer_; }

  // Registers with the registry and starts reading. Session thread.
  void start();
  // Queues bytes caused by another client. Any thread; store lock held.
  void deliver(std::string_view bytes);
  // Closes the connection quietly (server shutdown). Any thread.
  void shutdown();
  // Whether the peer has closed its end (or reset it) and nothing it sent is
  // left unread: the kernel knows before this session's thread does. What
  // it sent last (a leave, an abort) is this session's to read first. Any
  // thread; store lock held, so the socket stays open (close() leaves the
  // registry first).
  bool peerHungUp() const;

 private:
  // What one pass over buffered bytes did.
  struct Executed {
    std::size_t consumed = 0;          // bytes of complete requests run
    std::size_t completed = 0;         // requests run
    std::optional<std::string> error;  // why the connection must close, if it must
  };

  // Stop reading a client that does not read its replies past this backlog.
  static constexpr std::size_t kMaxOutputBacklog = 16 * 1024 * 1024;
  // A reply buffer larger than this (a big GET) is given back once sent.
  static constexpr std::size_t kKeepOutputBlockBytes = 64 * 1024;

  void startRead();
  void onReadable(const net::error_code& error);
  void onReadError(const net::error_code& error);
  void processInput();
  void processFresh(std::string_view input);
  void afterExecuting(const Executed& executed);
  Executed executeBuffered(std::string_view input);
  std::optional<std::string> executeRequestCaught();
  std::optional<std::string> executeRequest();
  std::optional<std::string> setRendezvousKey();
  void loseHungUpAgents();
  void prepareBufferForMore(std::size_t needed);
  void releaseInput();
  void appendOutput(std::string_view bytes);
  bool outputBacklogged();
  void flushIfIdle();
  void startWrite();
  bool takeOutput();
  void onWrite(const net::error_code& error);
  void resumeReadingIfDrained();
  void armRequestTimer();
  void onRequestTimer(const net::error_code& error, std::uint64_t completed_at_arm);
  void closeAfterFlush(const std::string& reason);
  // `why` counts for the metrics, unless a bad request already decided it.
  void close(CloseReason why, std::string_view reason, bool warn);
  void countDialect();

  net::tcp::socket socket_;
  const int descriptor_;  // socket_'s, for peerHungUp() from other threads
  const ClientId id_;
  const std::string peer_;
  const SessionContext& context_;
  ThreadLoad& load_;
  ThreadMetrics& metrics_;  // load_'s
  bool counted_active_ = false;
  proto::Dialect counted_dialect_ = proto::Dialect::Undecided;  // in metrics_.open_by_dialect
  std::optional<CloseReason> close_reason_;                     // set by a bad request
  std::chrono::steady_clock::time_point read_at_;               // the last read's completion
  KeySpace& key_space_;
  proto::RequestDecoder decoder_;
  proto::Request request_;
  std::string scratch_;  // one request's reply, before it joins out_

  // Bytes [in_begin_, in_end_) of a request not yet complete (or held back
  // while reading is paused); empty, with no heap block, otherwise.
  std::string in_;
  std::size_t in_begin_ = 0;
  std::size_t in_end_ = 0;
  std::size_t needed_ = 0;  // the partial request's known minimum size
  std::uint64_t completed_ = 0;
  bool read_paused_ = false;  // output backlog too large: stop reading
  // A readiness wait is queued. Never two: a write that drains a backlog
  // resumes reading from inside a read's handling, and both ends ask for one.
  bool read_waiting_ = false;
  bool closing_ = false;  // a bad request: flushing earlier replies, then closing
  bool closed_ = false;

  std::mutex out_mutex_;  // guards out_ and writing_
  std::string out_;
  bool writing_ = false;
  std::string sending_;  // the buffer of the write in flight

  // Made on first use: most connections never leave a request incomplete,
  // and an Asio timer is larger than the rest of a session's idle state.
  std::unique_ptr<net::asio::steady_timer> request_timer_;
  bool timer_armed_ = false;
};

using SessionPtr = std::shared_ptr<Session>;

}  // namespace ddprun::rdzv

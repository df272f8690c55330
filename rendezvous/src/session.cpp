// Flow of one connection (all on the session's thread):
//
//   startRead -> onReadable -> processFresh / processInput -> executeBuffered
//        ^                      |        (store lock held, replies appended to out_)
//        |                      +-> flushIfIdle -> startWrite -> onWrite --+
//        +--- unless the output backlog is too large; onWrite resumes -----+
//
// The writing half (from appendOutput on) is session_output.cpp; who answers
// a request (executeRequest) is session_requests.cpp.
//
// startRead waits for readability without a buffer; onReadable reads into
// the thread's shared buffer and runs the requests straight from it, keeping
// only an incomplete request's bytes (in_). So an idle connection holds no
// read buffer: at 100,000 connections that is most of a session's memory.
// While a request is incomplete, reads go straight into in_, which grows as
// bytes arrive.
//
// A request left incomplete longer than request_timeout closes the
// connection (armRequestTimer). Idle connections with nothing buffered are
// never timed out: 1.13 clients keep an idle callback connection forever.
// Exceptions: nothing here should throw on a client's input; Asio errors
// arrive as error codes and close this connection only, and a throw from
// running a request closes that request's connection only
// (executeRequestCaught).
#include "session.hpp"

#include <poll.h>
#include <sys/ioctl.h>

#include <algorithm>
#include <cstring>

#include "ddprun/proto/visible_text.hpp"
#include "ddprun/rendezvous/store_state.hpp"
#include "log.hpp"
#include "session_registry.hpp"

namespace ddprun::rdzv {
namespace {

// The least an incomplete request's buffer grows to, so a request that
// arrives in small pieces is not read a few bytes at a time.
constexpr std::size_t kMinInputBuffer = 1024;

}  // namespace

Session::Session(net::tcp::socket socket, ClientId id, std::string peer,
                 const SessionContext& context, ThreadLoad& load)
    : socket_(std::move(socket)),
      descriptor_(socket_.native_handle()),
      id_(id),
      peer_(std::move(peer)),
      context_(context),
      load_(load),
      metrics_(load.metrics),
      key_space_(context.state.keySpace("")),
      decoder_(context.limits, context.legacy_dialect) {}

void Session::start() {
  // The reads after each wait must return would_block, not block the thread.
  net::error_code ignored;
  socket_.non_blocking(true, ignored);
  metrics_.opened.add();
  metrics_.open_by_dialect[static_cast<std::size_t>(counted_dialect_)].add();
  {
    std::lock_guard lock(context_.store_mutex);
    context_.registry.add(shared_from_this());
  }
  startRead();
}

void Session::startRead() {
  if (closed_ || closing_ || read_paused_ || read_waiting_) {
    return;
  }
  read_waiting_ = true;
  socket_.async_wait(
      net::tcp::socket::wait_read,
      [self = shared_from_this()](const net::error_code& error) { self->onReadable(error); });
}

void Session::onReadable(const net::error_code& error) {
  read_waiting_ = false;
  if (error) {
    onReadError(error);
    return;
  }
  if (closed_) {
    return;
  }
  const bool partial = in_begin_ != in_end_;
  const net::asio::mutable_buffer target =
      partial ? net::asio::buffer(in_.data() + in_end_, in_.size() - in_end_)
              : net::asio::buffer(load_.read_buffer.get(), ThreadLoad::kReadBufferBytes);
  net::error_code read_error;
  const std::size_t bytes = socket_.read_some(target, read_error);
  if (read_error == net::asio::error::would_block || read_error == net::asio::error::try_again) {
    startRead();  // woken without data (it was read with the last request)
    return;
  }
  if (read_error) {
    onReadError(read_error);
    return;
  }
  read_at_ = std::chrono::steady_clock::now();
  if (partial) {
    in_end_ += bytes;
    processInput();
  } else {
    processFresh(std::string_view(load_.read_buffer.get(), bytes));
  }
}

void Session::onReadError(const net::error_code& error) {
  const bool mid_request = in_begin_ != in_end_;
  if (error == net::asio::error::operation_aborted || closing_) {
    close(CloseReason::kShutdown, "", false);
  } else if (mid_request) {
    close(CloseReason::kPeerLost,
          "disconnected in the middle of a request (" + std::to_string(in_end_ - in_begin_) +
              " of at least " + std::to_string(needed_) + " bytes): " + error.message(),
          true);
  } else {
    const bool clean =
        error == net::asio::error::eof || error == net::asio::error::connection_reset;
    close(clean ? CloseReason::kPeerClosed : CloseReason::kPeerLost,
          clean ? "closed the connection" : "failed: " + error.message(), !clean);
  }
}

// Runs what in_ holds: the rest of an incomplete request, or requests held
// back while the client was not reading its replies.
void Session::processInput() {
  const Executed executed =
      executeBuffered(std::string_view(in_.data() + in_begin_, in_end_ - in_begin_));
  in_begin_ += executed.consumed;
  afterExecuting(executed);
}

// Runs the requests just read into the thread's buffer; bytes left over (an
// incomplete request, or requests held back by the output backlog) move to
// in_, since the thread's buffer is the next read's.
void Session::processFresh(std::string_view input) {
  const Executed executed = executeBuffered(input);
  if (!executed.error && executed.consumed < input.size()) {
    in_.assign(input.substr(executed.consumed));
    in_begin_ = 0;
    in_end_ = in_.size();
  }
  afterExecuting(executed);
}

void Session::afterExecuting(const Executed& executed) {
  if (executed.error) {
    closeAfterFlush(*executed.error);
    return;
  }
  completed_ += executed.completed;
  countDialect();
  if (executed.completed > 0 && !counted_active_) {
    counted_active_ = true;
    ++load_.active;
  }
  if (in_begin_ == in_end_) {
    releaseInput();
  } else {
    if (!read_paused_) {
      prepareBufferForMore(needed_);
    }
    // Bytes are waiting: an incomplete request, or requests held back while
    // the client does not read its replies. Either must progress in time.
    if (!timer_armed_) {
      armRequestTimer();  // at most one timer in flight; it re-arms itself on progress
    }
  }
  flushIfIdle();
  startRead();
}

// Decodes and runs every complete request in `input`, under one store lock.
Session::Executed Session::executeBuffered(std::string_view input) {
  Executed executed;
  std::lock_guard lock(context_.store_mutex);
  while (executed.consumed < input.size()) {
    if (outputBacklogged()) {
      read_paused_ = true;
      return executed;
    }
    proto::DecodeResult result = decoder_.decode(input.substr(executed.consumed), request_);
    if (result.status == proto::DecodeStatus::NeedMore) {
      needed_ = result.size;
      return executed;
    }
    if (result.status == proto::DecodeStatus::Bad) {
      executed.error = "sent " + result.error;
      return executed;
    }
    metrics_.requests[static_cast<std::size_t>(request_.command)].add();
    scratch_.clear();
    if (auto failure = executeRequestCaught()) {
      executed.error =
          "sent " + std::string(proto::commandName(request_.command)) + ": " + *failure;
      return executed;
    }
    executed.consumed += result.size;
    ++executed.completed;
    if (!scratch_.empty()) {
      appendOutput(scratch_);
      if (scratch_.capacity() > kKeepOutputBlockBytes) {
        std::string().swap(scratch_);  // a big GET's reply is not kept for the next
      }
    }
    metrics_.request_seconds.observe(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - read_at_).count());
  }
  return executed;
}

// The decoder decides the dialect from the first request's bytes; the
// connection moves from "undecided" to it once.
void Session::countDialect() {
  const proto::Dialect dialect = decoder_.dialect();
  if (dialect != counted_dialect_) {
    metrics_.open_by_dialect[static_cast<std::size_t>(counted_dialect_)].subtract();
    metrics_.open_by_dialect[static_cast<std::size_t>(dialect)].add();
    counted_dialect_ = dialect;
  }
}

void Session::prepareBufferForMore(std::size_t needed) {
  if (in_begin_ > 0) {
    std::memmove(in_.data(), in_.data() + in_begin_, in_end_ - in_begin_);
    in_end_ -= in_begin_;
    in_begin_ = 0;
  }
  // Grow only when full, by doubling: memory follows the bytes a client has
  // actually sent, never the length it claims (a claimed 8 MiB value that
  // never arrives costs nothing). `needed` caps the growth at the request's
  // size, which the decoder already checked against the limits.
  if (in_end_ == in_.size()) {
    in_.resize(
        std::min(std::max(2 * in_.size(), kMinInputBuffer), std::max(needed, in_.size() + 1)));
  }
}

// Gives the incomplete request's buffer back once it is used up, so an idle
// connection holds none (a swap, because clear() would keep the block).
void Session::releaseInput() {
  in_begin_ = in_end_ = 0;
  if (!in_.empty()) {
    std::string().swap(in_);
  }
}

// Like PyTorch's servers, which answer each request before reading the next,
// the requests before a bad one get their replies; then the connection closes.
// A peer that will not read them is closed after request_timeout.
void Session::closeAfterFlush(const std::string& reason) {
  rdzvLog().warn("store client {} ({}) {}; closing it", peer_,
                 proto::dialectName(decoder_.dialect()), proto::visible(reason));
  closing_ = true;
  close_reason_ = CloseReason::kBadRequest;
  {
    std::lock_guard lock(context_.store_mutex);
    key_space_.forgetClient(id_);
  }
  net::error_code ignored;
  socket_.shutdown(net::tcp::socket::shutdown_receive, ignored);
  flushIfIdle();
  {
    std::lock_guard lock(out_mutex_);
    if (!writing_) {
      close(CloseReason::kBadRequest, "", false);
      return;
    }
  }
  if (!timer_armed_) {
    armRequestTimer();
  }
}

void Session::armRequestTimer() {
  if (!request_timer_) {
    request_timer_ = std::make_unique<net::asio::steady_timer>(socket_.get_executor());
  }
  timer_armed_ = true;
  request_timer_->expires_after(context_.request_timeout);
  request_timer_->async_wait(
      [self = shared_from_this(), at_arm = completed_](const net::error_code& error) {
        self->onRequestTimer(error, at_arm);
      });
}

void Session::onRequestTimer(const net::error_code& error, std::uint64_t completed_at_arm) {
  if (error || closed_) {
    return;  // re-armed (cancelled) or closing
  }
  timer_armed_ = false;
  if (closing_) {
    close(CloseReason::kBadRequest, "", false);  // it never read the replies sent before the close
    return;
  }
  if (in_begin_ == in_end_) {
    return;
  }
  if (completed_ == completed_at_arm && read_paused_) {
    close(
        CloseReason::kNotReading,
        "has not read its replies for " + std::to_string(context_.request_timeout.count()) + " ms",
        true);
    return;
  }
  if (completed_ == completed_at_arm) {
    close(CloseReason::kRequestTimeout,
          "left a request incomplete for " + std::to_string(context_.request_timeout.count()) +
              " ms (" + std::to_string(in_end_ - in_begin_) + " of at least " +
              std::to_string(needed_) + " bytes)",
          true);
    return;
  }
  armRequestTimer();  // progress was made; give the new partial request its time
}

bool Session::peerHungUp() const {
  pollfd descriptor{descriptor_, POLLRDHUP, 0};
  if (::poll(&descriptor, 1, 0) != 1 ||
      (descriptor.revents & (POLLRDHUP | POLLHUP | POLLERR)) == 0) {
    return false;
  }
  int unread = 0;
  return ::ioctl(descriptor_, FIONREAD, &unread) == 0 && unread == 0;
}

void Session::shutdown() {
  net::asio::post(socket_.get_executor(),
                  [self = shared_from_this()] { self->close(CloseReason::kShutdown, "", false); });
}

void Session::close(CloseReason why, std::string_view reason, bool warn) {
  if (closed_) {
    return;
  }
  closed_ = true;
  metrics_.closed[static_cast<std::size_t>(close_reason_.value_or(why))].add();
  metrics_.open_by_dialect[static_cast<std::size_t>(counted_dialect_)].subtract();
  --load_.connections;
  if (counted_active_) {
    --load_.active;
  }
  // A reason may quote what the client sent (a key, a run id, an agent id).
  if (warn) {
    rdzvLog().warn("store client {} ({}) {}; closing it", peer_,
                   proto::dialectName(decoder_.dialect()), proto::visible(reason));
  } else if (!reason.empty()) {
    rdzvLog().debug("store client {} {}", peer_, proto::visible(reason));
  }
  bool lost_agent = false;
  {
    std::lock_guard lock(context_.store_mutex);
    key_space_.forgetClient(id_);
    context_.registry.remove(id_);
    // The connection was the agent's lease: a joined agent is lost at once.
    lost_agent = context_.rendezvous.onDisconnect(id_, RendezvousService::Clock::now(), key_space_);
  }
  if (lost_agent) {
    context_.rendezvous_changed();  // plain store clients closing cost nothing here
  }
  net::error_code ignored;
  socket_.shutdown(net::tcp::socket::shutdown_both, ignored);
  socket_.close(ignored);
  if (request_timer_) {
    request_timer_->cancel();
  }
}

}  // namespace ddprun::rdzv

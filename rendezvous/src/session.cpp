// Flow of one connection (all on the session's thread):
//
//   startRead -> onRead -> processInput -> executeBuffered (store lock held,
//        ^                      |             replies appended to out_)
//        |                      +-> flushIfIdle -> startWrite -> onWrite --+
//        +--- unless the output backlog is too large; onWrite resumes -----+
//
// A request left incomplete longer than request_timeout closes the
// connection (armRequestTimer). Idle connections with nothing buffered are
// never timed out: 1.13 clients keep an idle callback connection forever.
// Exceptions: nothing here should throw on a client's input; Asio errors
// arrive as error codes and close this connection only, and a throw from
// running a request closes that request's connection only
// (executeRequestCaught).
#include "session.hpp"

#include <algorithm>
#include <cstring>

#include "ddprun/rendezvous/store_state.hpp"
#include "log.hpp"
#include "session_registry.hpp"

namespace ddprun::rdzv {
namespace {

// Whether a request other than SET would write a reserved rendezvous key.
bool writesRendezvousKey(const proto::Request& request) {
  switch (request.command) {
    case proto::Command::CompareSet:
    case proto::Command::Add:
    case proto::Command::DeleteKey:
    case proto::Command::Append:
    case proto::Command::MultiSet:
    case proto::Command::QueuePush:
    case proto::Command::QueuePop:
      return std::any_of(request.keys.begin(), request.keys.end(), [](const auto& key) {
        return RendezvousService::isRendezvousKey(key) || RendezvousService::isQueryKey(key);
      });
    case proto::Command::Set:
      return RendezvousService::isQueryKey(request.keys.front());
    default:
      return false;
  }
}

constexpr std::size_t kInitialReadBuffer = 1024;
// Idle connections give back large buffers, so 10k clients stay small.
constexpr std::size_t kShrinkReadBufferAbove = 64 * 1024;
// Stop reading a client that does not read its replies past this backlog.
constexpr std::size_t kMaxOutputBacklog = 16 * 1024 * 1024;

}  // namespace

Session::Session(net::tcp::socket socket, ClientId id, std::string peer,
                 const SessionContext& context, ThreadLoad& load)
    : socket_(std::move(socket)),
      id_(id),
      peer_(std::move(peer)),
      context_(context),
      load_(load),
      metrics_(load.metrics),
      key_space_(context.state.keySpace("")),
      decoder_(context.limits, context.legacy_dialect),
      in_(kInitialReadBuffer, '\0') {}

void Session::start() {
  metrics_.opened.add();
  metrics_.open_by_dialect[static_cast<std::size_t>(counted_dialect_)].add();
  {
    std::lock_guard lock(context_.store_mutex);
    context_.registry.add(shared_from_this());
  }
  startRead();
}

void Session::startRead() {
  if (closed_ || closing_ || read_paused_) {
    return;
  }
  socket_.async_read_some(
      net::asio::buffer(in_.data() + in_end_, in_.size() - in_end_),
      [self = shared_from_this()](const net::error_code& error, std::size_t bytes) {
        self->onRead(error, bytes);
      });
}

void Session::onRead(const net::error_code& error, std::size_t bytes) {
  if (error) {
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
    return;
  }
  read_at_ = std::chrono::steady_clock::now();
  in_end_ += bytes;
  processInput();
}

void Session::processInput() {
  std::size_t completed = 0;
  if (auto error = executeBuffered(completed)) {
    closeAfterFlush(*error);
    return;
  }
  completed_ += completed;
  countDialect();
  if (completed > 0 && !counted_active_) {
    counted_active_ = true;
    ++load_.active;
  }
  if (in_begin_ == in_end_) {
    in_begin_ = in_end_ = 0;
    if (in_.size() > kShrinkReadBufferAbove) {
      in_.assign(kInitialReadBuffer, '\0');
      in_.shrink_to_fit();
    }
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

// Decodes and runs every complete request buffered, under one store lock.
// Returns why the connection must close, if it must.
std::optional<std::string> Session::executeBuffered(std::size_t& completed) {
  std::lock_guard lock(context_.store_mutex);
  while (in_begin_ < in_end_) {
    if (outputBacklogged()) {
      read_paused_ = true;
      return std::nullopt;
    }
    const std::string_view input(in_.data() + in_begin_, in_end_ - in_begin_);
    proto::DecodeResult result = decoder_.decode(input, request_);
    if (result.status == proto::DecodeStatus::NeedMore) {
      needed_ = result.size;
      return std::nullopt;
    }
    if (result.status == proto::DecodeStatus::Bad) {
      return "sent " + result.error;
    }
    metrics_.requests[static_cast<std::size_t>(request_.command)].add();
    scratch_.clear();
    if (auto failure = executeRequestCaught()) {
      return "sent " + std::string(proto::commandName(request_.command)) + ": " + *failure;
    }
    in_begin_ += result.size;
    ++completed;
    if (!scratch_.empty()) {
      appendOutput(scratch_);
    }
    metrics_.request_seconds.observe(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - read_at_).count());
  }
  return std::nullopt;
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

// Runs one request; a throw from it (a defect, or memory exhausted) fails
// only this request's connection, never the thread every client shares.
// A throw may come after part of the request took effect; the client loses
// its connection and sees the request unanswered, as if the daemon had died
// for it alone.
std::optional<std::string> Session::executeRequestCaught() {
  try {
    return executeRequest();
  } catch (const std::exception& error) {
    return std::string("made the daemon fail: ") + error.what();
  }
}

// A SET of a reserved rendezvous key goes to the rendezvous service, not the
// store; no other command may write one (a forged event, a deleted one). A
// GET of a query key is answered by the service; nothing may write one.
// Everything else is a store command. Store lock held.
std::optional<std::string> Session::executeRequest() {
  if (writesRendezvousKey(request_)) {
    return "a " + std::string(proto::commandName(request_.command)) +
           " of a reserved rendezvous key (only the rendezvous writes them)";
  }
  // Before the service answers: a legacy client's stale WAIT must not
  // later complete into the reply stream of this request.
  key_space_.cancelLegacyWaitBefore(id_, decoder_.dialect(), request_.command);
  if (request_.command == proto::Command::Get &&
      RendezvousService::isQueryKey(request_.keys.front())) {
    proto::WireWriter(scratch_).bytes(
        context_.rendezvous.answer(request_.keys.front(), RendezvousService::Clock::now()));
    return std::nullopt;
  }
  if (request_.command == proto::Command::Set &&
      RendezvousService::isRendezvousKey(request_.keys.front())) {
    auto failure = context_.rendezvous.onSet(id_, request_.keys.front(), request_.values.front(),
                                             RendezvousService::Clock::now(), key_space_);
    context_.rendezvous_changed();
    return failure;
  }
  return key_space_.execute(id_, decoder_.dialect(), request_, scratch_);
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
    in_.resize(std::min(2 * in_.size(), std::max(needed, in_.size() + 1)));
  }
}

void Session::appendOutput(std::string_view bytes) {
  std::lock_guard lock(out_mutex_);
  out_.append(bytes);
}

bool Session::outputBacklogged() {
  std::lock_guard lock(out_mutex_);
  return out_.size() + sending_.size() > kMaxOutputBacklog;
}

void Session::deliver(std::string_view bytes) {
  bool start_writer = false;
  {
    std::lock_guard lock(out_mutex_);
    out_.append(bytes);
    start_writer = !writing_;
    writing_ = true;
  }
  if (start_writer) {
    net::asio::post(socket_.get_executor(), [self = shared_from_this()] { self->startWrite(); });
  }
}

void Session::flushIfIdle() {
  {
    std::lock_guard lock(out_mutex_);
    if (writing_ || out_.empty()) {
      return;
    }
    writing_ = true;
  }
  startWrite();
}

void Session::startWrite() {
  {
    std::lock_guard lock(out_mutex_);
    sending_.clear();
    if (out_.empty() || closed_) {
      writing_ = false;
      if (closing_ && !closed_) {
        net::asio::post(socket_.get_executor(), [self = shared_from_this()] {
          self->close(CloseReason::kBadRequest, "", false);
        });
      }
      return;
    }
    sending_.swap(out_);
  }
  net::asio::async_write(socket_, net::asio::buffer(sending_),
                         [self = shared_from_this()](const net::error_code& error, std::size_t) {
                           self->onWrite(error);
                         });
}

void Session::onWrite(const net::error_code& error) {
  if (error) {
    const bool aborted = error == net::asio::error::operation_aborted;
    close(aborted ? CloseReason::kShutdown : CloseReason::kPeerLost,
          aborted ? "" : "stopped reading: " + error.message(), false);
    return;
  }
  startWrite();
  if (read_paused_ && !closing_ && !outputBacklogged()) {
    read_paused_ = false;
    processInput();
  }
}

// Like PyTorch's servers, which answer each request before reading the next,
// the requests before a bad one get their replies; then the connection closes.
// A peer that will not read them is closed after request_timeout.
void Session::closeAfterFlush(const std::string& reason) {
  rdzvLog().warn("store client {} ({}) {}; closing it", peer_,
                 proto::dialectName(decoder_.dialect()), reason);
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
    request_timer_.emplace(socket_.get_executor());
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
  if (warn) {
    rdzvLog().warn("store client {} ({}) {}; closing it", peer_,
                   proto::dialectName(decoder_.dialect()), reason);
  } else if (!reason.empty()) {
    rdzvLog().debug("store client {} {}", peer_, reason);
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

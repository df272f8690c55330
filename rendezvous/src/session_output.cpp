// The writing half of a Session (see session.cpp for the whole flow): the
// queue of replies and deliveries, and the one write in flight. deliver()
// runs on any thread with the store lock held; everything else on the
// session's thread. out_mutex_ guards out_ and writing_ between the two.
#include "session.hpp"

namespace ddprun::rdzv {

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

// Most replies fit in the socket's send buffer: each is sent at once, and
// only what does not fit goes to an Asio write (whose completion handler is
// a post and a wake-up per reply; on loopback the send is most of the
// server's CPU anyway, so the saving is the handler, not the syscall).
void Session::startWrite() {
  while (takeOutput()) {
    net::error_code error;
    const std::size_t sent = socket_.write_some(net::asio::buffer(sending_), error);
    if (!error && sent == sending_.size()) {
      resumeReadingIfDrained();
      continue;
    }
    if (error && error != net::asio::error::would_block && error != net::asio::error::try_again) {
      onWrite(error);
      return;
    }
    net::asio::async_write(
        socket_, net::asio::buffer(sending_) + sent,
        [self = shared_from_this()](const net::error_code& write_error, std::size_t) {
          self->onWrite(write_error);
        });
    return;
  }
}

// Moves the queued bytes to sending_; false, with the writer stopped, when
// there are none (or the connection has closed).
bool Session::takeOutput() {
  std::lock_guard lock(out_mutex_);
  sending_.clear();
  if (!out_.empty() && !closed_) {
    sending_.swap(out_);
    return true;
  }
  writing_ = false;
  // out_ and sending_ trade blocks on every write; neither keeps a large
  // reply's block once the connection has gone quiet.
  if (sending_.capacity() > kKeepOutputBlockBytes) {
    std::string().swap(sending_);
  }
  if (out_.capacity() > kKeepOutputBlockBytes) {
    std::string().swap(out_);
  }
  if (closing_ && !closed_) {
    net::asio::post(socket_.get_executor(), [self = shared_from_this()] {
      self->close(CloseReason::kBadRequest, "", false);
    });
  }
  return false;
}

void Session::onWrite(const net::error_code& error) {
  if (error) {
    const bool aborted = error == net::asio::error::operation_aborted;
    close(aborted ? CloseReason::kShutdown : CloseReason::kPeerLost,
          aborted ? "" : "stopped reading: " + error.message(), false);
    return;
  }
  resumeReadingIfDrained();
  startWrite();
}

// Reading stopped while the client let its replies pile up; once they have
// gone, the requests held back run and reading resumes.
void Session::resumeReadingIfDrained() {
  if (read_paused_ && !closing_ && !outputBacklogged()) {
    read_paused_ = false;
    processInput();
  }
}

}  // namespace ddprun::rdzv

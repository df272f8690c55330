#include "fixture_replayer.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <stdexcept>

#include "ddprun/test_support/hex.hpp"
#include "wire_client.hpp"

namespace ddprun::wire_test {

FixtureReplayer::FixtureReplayer(const test_support::FixtureLog& log, std::uint16_t port)
    : log_(log), port_(port) {
  for (std::size_t i = 0; i < log_.records().size(); ++i) {
    order_.push_back(i);
  }
}

std::size_t FixtureReplayer::positionOf(int line) const {
  for (std::size_t pos = 0; pos < order_.size(); ++pos) {
    if (log_.records()[order_[pos]].line == line) {
      return pos;
    }
  }
  return order_.size();
}

void FixtureReplayer::moveBefore(int line, int before_line) {
  const std::size_t from = positionOf(line);
  if (from == order_.size() || positionOf(before_line) == order_.size() || from < next_ ||
      positionOf(before_line) < next_) {
    throw std::logic_error(log_.name() + ": cannot move line " + std::to_string(line) +
                           " before line " + std::to_string(before_line));
  }
  const std::size_t index = order_[from];
  order_.erase(order_.begin() + static_cast<std::ptrdiff_t>(from));
  order_.insert(order_.begin() + static_cast<std::ptrdiff_t>(positionOf(before_line)), index);
}

void FixtureReplayer::after(int line, Hook hook) { hooks_[line].push_back(std::move(hook)); }

RawConnection& FixtureReplayer::connection(int conn) {
  const auto it = conns_.find(conn);
  if (it == conns_.end()) {
    throw std::out_of_range(log_.name() + ": connection " + std::to_string(conn) +
                            " is not open at this point of the replay");
  }
  return it->second;
}

std::string FixtureReplayer::where(const test_support::Record& record) const {
  return log_.name() + ":" + std::to_string(record.line) + " (conn" + std::to_string(record.conn) +
         ")";
}

bool FixtureReplayer::replayThrough(int line) {
  const std::size_t last = line == INT_MAX ? order_.size() - 1 : positionOf(line);
  while (next_ < order_.size() && next_ <= last) {
    const test_support::Record& record = log_.records()[order_[next_++]];
    if (!replay(record)) {
      return false;
    }
    for (const Hook& hook : hooks_[record.line]) {
      hook();
      if (::testing::Test::HasFatalFailure()) {
        return false;
      }
    }
  }
  return true;
}

bool FixtureReplayer::replayAll() { return replayThrough(INT_MAX) && expectNoStrayBytes(); }

void FixtureReplayer::skipThrough(int line) {
  next_ = std::max(next_, std::min(positionOf(line) + 1, order_.size()));
}

bool FixtureReplayer::replay(const test_support::Record& record) {
  if (record.dir == test_support::Direction::Open) {
    conns_.emplace(record.conn, RawConnection(port_));
    last_dir_[record.conn] = test_support::Direction::Open;
    return true;
  }
  if (record.endOfStream()) {
    return endStream(record);
  }
  const bool ok = record.dir == test_support::Direction::ClientToServer ? sendChunk(record)
                                                                        : expectChunk(record);
  last_dir_[record.conn] = record.dir;
  return ok;
}

bool FixtureReplayer::sendChunk(const test_support::Record& record) {
  RawConnection& conn = connection(record.conn);
  if (last_dir_[record.conn] == test_support::Direction::ClientToServer &&
      conn.bytesAvailableWithin(kQuietWindow)) {
    ADD_FAILURE() << where(record) << ": before this chunk the server sent "
                  << test_support::toHex(conn.buffered())
                  << ", but in the capture the server sent nothing between the previous "
                     "chunk and this one";
    return false;
  }
  if (!conn.sendAll(record.bytes)) {
    ADD_FAILURE() << where(record) << ": the server closed the connection before "
                  << test_support::toHex(record.bytes) << " could be sent";
    return false;
  }
  return true;
}

bool FixtureReplayer::expectChunk(const test_support::Record& record) {
  RawConnection& conn = connection(record.conn);
  const auto got = conn.recvExact(record.bytes.size(), kReplyTimeout);
  if (!got) {
    ADD_FAILURE() << where(record) << ": expected " << record.bytes.size() << " bytes "
                  << test_support::toHex(record.bytes) << " but got only "
                  << test_support::toHex(conn.buffered()) << " in " << kReplyTimeout.count()
                  << " ms" << (conn.peerClosed() ? " before the server closed the connection" : "");
    return false;
  }
  if (*got != record.bytes) {
    ADD_FAILURE() << where(record) << ": reply differs from the capture\n  expected "
                  << test_support::toHex(record.bytes) << "\n  got      "
                  << test_support::toHex(*got);
    return false;
  }
  return true;
}

bool FixtureReplayer::endStream(const test_support::Record& record) {
  if (record.dir == test_support::Direction::ClientToServer) {
    connection(record.conn).shutdownWrite();
    half_closed_.insert(record.conn);
    return true;
  }
  if (!half_closed_.contains(record.conn)) {
    // The captured server closed first: its process exited (e.g. rank 0,
    // which hosted the store, finishing before rank 1). ddprund outlives
    // its clients, so there is nothing to reproduce.
    return true;
  }
  RawConnection& conn = connection(record.conn);
  if (!conn.waitForClose(kReplyTimeout)) {
    ADD_FAILURE() << where(record) << ": the server did not close the connection within "
                  << kReplyTimeout.count() << " ms after the client's end of stream";
    return false;
  }
  if (!conn.buffered().empty()) {
    ADD_FAILURE() << where(record) << ": the server sent " << test_support::toHex(conn.buffered())
                  << " before closing; the capture has no such bytes";
    return false;
  }
  return true;
}

bool FixtureReplayer::expectNoStrayBytes() {
  bool ok = true;
  for (auto& [id, conn] : conns_) {
    if (conn.bytesAvailableWithin(kQuietWindow)) {
      ADD_FAILURE() << log_.name() << " conn" << id
                    << ": stray bytes after the replay: " << test_support::toHex(conn.buffered());
      ok = false;
    }
  }
  return ok;
}

}  // namespace ddprun::wire_test
